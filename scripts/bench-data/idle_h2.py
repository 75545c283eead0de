"""Opens N idle HTTP/2 connections (preface and an empty SETTINGS frame, then nothing) to host:port, prints
'ready N' when they are all open, and keeps them until stdin closes. Usage: idle_h2.py HOST PORT N"""
import socket
import sys

host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
hello = b'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n' + b'\x00\x00\x00\x04\x00\x00\x00\x00\x00'
conns = []
for _ in range(n):
    s = socket.create_connection((host, port))
    s.sendall(hello)
    conns.append(s)
for s in conns:  # the server's SETTINGS: every connection was served
    s.settimeout(10)
    if not s.recv(65536):
        sys.exit('a connection was closed')
print('ready %d' % len(conns), flush=True)
sys.stdin.read()

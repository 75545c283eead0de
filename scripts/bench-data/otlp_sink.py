"""An OTLP/HTTP collector for scripts/bench tracing: answers every POST with 200 and an empty
ExportTraceServiceResponse without decoding it (so the sink costs little CPU), and counts the exports and their
bytes; GET /count prints "<exports> <bytes>" and resets the counts. Usage: otlp_sink.py PORT"""
import http.server
import sys
import threading

counts = {'exports': 0, 'bytes': 0}
lock = threading.Lock()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'

    def log_message(self, *args):
        pass

    def _answer(self, body, content_type):
        self.send_response(200)
        self.send_header('Content-Type', content_type)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        size = int(self.headers.get('Content-Length', '0'))
        self.rfile.read(size)
        with lock:
            counts['exports'] += 1
            counts['bytes'] += size
        self._answer(b'', 'application/x-protobuf')

    def do_GET(self):
        with lock:
            text = f"{counts['exports']} {counts['bytes']}\n"
            counts['exports'] = counts['bytes'] = 0
        self._answer(text.encode(), 'text/plain')


http.server.ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), Handler).serve_forever()

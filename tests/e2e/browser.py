"""A small headless-Chromium driver over the DevTools protocol on a pipe (--remote-debugging-pipe), for the tests
of the pages Sluice serves. Chromium reads commands on its fd 3 and writes replies and events on its fd 4: JSON
messages, each ending in a NUL byte. Every read has a deadline, so a hung browser fails the test instead of
hanging it.

    with Browser() as b:
        page = b.open('http://127.0.0.1:6070/dashboard')
        page.wait_for('document.body.dataset.updates >= 2')
        page.press('/')
"""

import base64
import fcntl
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time

CHROMIUM = '/usr/bin/chromium'
SETPRIV = shutil.which('setpriv')

# Keys other than letters and digits: key -> (code, windowsVirtualKeyCode, text).
KEYS = {'Tab': ('Tab', 9, ''), 'Escape': ('Escape', 27, ''), 'Enter': ('Enter', 13, '\r'),
        'Backspace': ('Backspace', 8, ''), ' ': ('Space', 32, ' '), '/': ('Slash', 191, '/'),
        '.': ('Period', 190, '.'), '-': ('Minus', 189, '-'), '_': ('Minus', 189, '_'), '=': ('Equal', 187, '=')}


def key_definition(key):
    if key in KEYS:
        return KEYS[key]
    if len(key) == 1 and key.isascii() and key.isalnum():
        return ('Key' + key.upper() if key.isalpha() else 'Digit' + key), ord(key.upper()), key
    raise ValueError('press() does not know the key %r' % key)


class BrowserError(AssertionError):
    pass


class Browser:
    """Headless Chromium with a profile of its own. A context manager: at exit Chromium is killed, with every
    process it started (it leads its own process group), and the profile is removed, whatever happened."""

    def __init__(self, timeout=15.0):
        if not os.path.exists(CHROMIUM):
            raise BrowserError('%s is missing (scripts/setup installs it)' % CHROMIUM)
        self.timeout, self.pages, self.proc, self._id, self._buf = timeout, {}, None, 0, b''
        self.profile = tempfile.mkdtemp(prefix='sluice-chromium-')
        self.log = open(os.path.join(self.profile, 'chromium.log'), 'w+b')
        to_child, self._write_fd = os.pipe()
        self._read_fd, from_child = os.pipe()
        # Moved above 9 so that "3<&A 4>&B" cannot overwrite one before it is copied (bash: dash takes fds 0-9).
        fds = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (to_child, from_child)]
        for fd in (to_child, from_child):
            os.close(fd)
        shell = 'exec "$0" "$@" 3<&{0} 4>&{1} {0}<&- {1}>&-'.format(*fds)
        cmd = ['/bin/bash', '-c', shell, CHROMIUM, '--headless=new', '--no-sandbox', '--disable-gpu',
               '--remote-debugging-pipe', '--user-data-dir=' + self.profile, '--window-size=1366,900',
               '--hide-scrollbars', '--no-first-run', '--no-default-browser-check', 'about:blank']
        if SETPRIV:
            cmd = [SETPRIV, '--pdeathsig', 'KILL', '--'] + cmd  # dies with the test process, even by SIGKILL
        try:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
                                         pass_fds=fds, start_new_session=True)
            self.call('Target.setDiscoverTargets', {'discover': False})  # an answer: Chromium is up
        except BaseException:
            self.close()
            raise
        finally:
            for fd in fds:
                os.close(fd)

    def call(self, method, params=None, session=None, timeout=None):
        """Sends one command and reads until its reply; events read on the way go to their page. -> result."""
        self._id += 1
        msg = {'id': self._id, 'method': method, 'params': params or {}}
        if session:
            msg['sessionId'] = session
        data = json.dumps(msg).encode() + b'\0'
        deadline = time.monotonic() + (timeout or self.timeout)
        while data:
            if not select.select([], [self._write_fd], [], max(0, deadline - time.monotonic()))[1]:
                raise BrowserError('Chromium does not read the command %s' % method)
            data = data[os.write(self._write_fd, data):]
        while True:
            while b'\0' not in self._buf:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self._read_fd], [], [], left)[0]:
                    raise BrowserError('no answer from Chromium to %s in time' % method)
                chunk = os.read(self._read_fd, 1 << 20)
                if not chunk:
                    raise BrowserError('Chromium closed its pipe (exit code %r); its log:\n%s'
                                       % (self.proc.poll(), self.log_text()))
                self._buf += chunk
            text, self._buf = self._buf.split(b'\0', 1)
            reply = json.loads(text)
            if reply.get('id') == self._id:
                if 'error' in reply:
                    raise BrowserError('%s failed: %s' % (method, reply['error']))
                return reply.get('result', {})
            if reply.get('sessionId') in self.pages and 'method' in reply:
                self.pages[reply['sessionId']].event(reply['method'], reply.get('params', {}))

    def open(self, url, width=1366, height=900):
        """A new tab loading `url`, its requests recorded from the first; returns once the page has loaded."""
        target = self.call('Target.createTarget', {'url': 'about:blank'})['targetId']
        session = self.call('Target.attachToTarget', {'targetId': target, 'flatten': True})['sessionId']
        page = self.pages[session] = Page(self, session)
        for method, params in (('Page.enable', {}), ('Network.enable', {}), ('Runtime.enable', {}),
                               ('Emulation.setDeviceMetricsOverride', {'width': width, 'height': height,
                                                                       'deviceScaleFactor': 1, 'mobile': False}),
                               ('Emulation.setFocusEmulationEnabled', {'enabled': True}),
                               ('Page.bringToFront', {}), ('Page.navigate', {'url': url})):
            page.send(method, params)
        page.wait_for("document.readyState === 'complete' && location.href === %s" % json.dumps(url))
        return page

    def log_text(self):
        self.log.seek(0)
        return self.log.read().decode('utf-8', 'replace')[-4000:]

    def close(self):
        try:
            if self.proc is not None and self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)  # the group: renderers and helpers too
            if self.proc is not None:
                self.proc.wait(10)
        finally:
            for fd in (self._write_fd, self._read_fd):
                if fd is not None:
                    os.close(fd)
            self._write_fd = self._read_fd = None
            self.log.close()
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class Page:
    """One tab, attached with a session of its own. `requests`: the URL of every request the page sent;
    `dialogs`: the message of every JavaScript dialog (alert, confirm, ...) it opened."""

    def __init__(self, browser, session):
        self.browser, self.session, self.requests, self.dialogs = browser, session, [], []

    def send(self, method, params=None, timeout=None):
        return self.browser.call(method, params, self.session, timeout)

    def event(self, method, params):
        if method == 'Network.requestWillBeSent':
            self.requests.append(params['request']['url'])
        elif method == 'Page.javascriptDialogOpening':
            self.dialogs.append(params.get('message'))

    def evaluate(self, js):
        """The value of a JavaScript expression (a promise's once settled); raises with the exception's text."""
        r = self.send('Runtime.evaluate', {'expression': js, 'returnByValue': True, 'awaitPromise': True})
        if 'exceptionDetails' in r:
            d = r['exceptionDetails']
            raise BrowserError('%s: %s' % (js, d.get('exception', {}).get('description') or d.get('text')))
        return r['result'].get('value')

    def wait_for(self, js_predicate, timeout=10.0, interval=0.05):
        """Polls a JavaScript expression until it is truthy. -> its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(js_predicate)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError('timed out after %.1f s waiting for %s (last value %r)' % (timeout, js_predicate,
                                                                                             value))
            time.sleep(interval)

    def press(self, key):
        """One key as a keyboard sends it: keyDown, char (keys that type something), keyUp."""
        code, vk, text = key_definition(key)
        base = {'key': key, 'code': code, 'windowsVirtualKeyCode': vk, 'nativeVirtualKeyCode': vk}
        self.send('Input.dispatchKeyEvent', dict(base, type='rawKeyDown'))
        if text:
            self.send('Input.dispatchKeyEvent', dict(base, type='char', text=text, unmodifiedText=text))
        self.send('Input.dispatchKeyEvent', dict(base, type='keyUp'))

    def type_text(self, text):
        for ch in text:
            self.press(ch)

    def screenshot(self, path):
        """The viewport, as a PNG file."""
        data = self.send('Page.captureScreenshot', {'format': 'png'}, timeout=30)['data']
        with open(path, 'wb') as f:
            f.write(base64.b64decode(data))

"""The holidays API (University of Waterloo Open Data v2, GET /events/holidays.{json,xml,ics}): the shipped list in
every format compared with etc/holidays/holidays.csv, the exact json envelope, JSONP callbacks, RFC 5545 lines
(CRLF, folding at 75 octets without cutting a UTF-8 character, text escaping), nulls from empty cells, the
API's error codes (501, 405, 400, and 511/401/403 with keys required), per-key request counts, the CSV loader's
accepted and refused files at start-up, and the file reloaded on change (a bad file keeps the old list)."""

import csv
import datetime
import json
import os
import re
import tempfile
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET

import icalendar

import harness
from harness import Sluice

SHIPPED_CSV = os.path.join(harness.REPO, 'etc', 'holidays', 'holidays.csv')
PATH = '/events/holidays'

JSON_TYPE = 'application/json; charset=utf-8'
JSONP_TYPE = 'application/javascript; charset=utf-8'
XML_TYPE = 'application/xml; charset=utf-8'
ICS_TYPE = 'text/calendar; charset=utf-8'

KEYS = """keys:
  - {key: count-one, name: one}
  - {key: count-two, name: two}
  - {key: plain, name: plain}
  - {key: wrapped, name: wrapped}
  - {key: xml-key, name: xml}
  - {key: banned-key, name: banned, enabled: false}
"""

# Names that exercise escaping and folding: RFC 5545 TEXT escapes, XML's & < >, JSON's quotes and backslash, and
# long multibyte names whose 75-octet fold point falls inside a character.
COMMAS = 'Comma, semicolon; and back\\slash'
QUOTES = 'Quote "inside" & <tag>'
LONG_2 = '\u00e9' * 40               # é: 2 octets each
LONG_3 = '\u20ac' * 40               # €: 3 octets each
LONG_4 = '\U0001F389' * 30           # 🎉: 4 octets each
LONG_ASCII = ' '.join(['A very long holiday name'] * 6)
CUSTOM_ROWS = [
    (COMMAS, '2030-01-01'),
    (LONG_2, '2030-01-02'),
    (LONG_3, '2030-01-03'),
    (LONG_4, '2030-01-04'),
    (LONG_ASCII, '2030-01-05'),
    (QUOTES, '2030-01-06'),
    (None, '2030-01-07'),            # empty name cell
    ('Mystery Day', None),           # empty date cell
    ('New Year\u2019s Day', '2030-01-08'),
    ("New Year's Day", '2030-01-08'),   # the same UID stem as the row above
    ('Leap eve', '2028-02-28'),
    ('Not leap', '2030-02-28'),
    ('Year end', '2030-12-31'),
]

server = None        # the shipped list, no keys
custom = None        # CUSTOM_ROWS from HOLIDAYS_CSV
tmp = None


def shipped_holidays():
    """[(name, date)] from the shipped CSV, in file order."""
    with open(SHIPPED_CSV, newline='', encoding='utf-8') as f:
        rows = list(csv.reader(f))
    assert rows[0] == ['name', 'date'], rows[0]
    return [(r[0], r[1]) for r in rows[1:] if r]


def csv_text(rows, header='name,date'):
    """A name,date CSV (RFC 4180 quoting, empty cell for None)."""
    lines = [header]
    for name, date in rows:
        cell = '' if name is None else name
        if any(c in cell for c in ',"\r\n'):
            cell = '"' + cell.replace('"', '""') + '"'
        lines.append('%s,%s' % (cell, date or ''))
    return '\n'.join(lines) + '\n'


def write_file(path, data):
    with open(path, 'wb') as f:
        f.write(data.encode('utf-8') if isinstance(data, str) else data)


def write_atomically(path, data):
    write_file(path + '.tmp', data)
    os.replace(path + '.tmp', path)


_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def fetch(port, path, method='GET', body=None):
    """-> (status, headers with lower-case names, raw body bytes). 4xx/5xx are returned, not raised."""
    req = urllib.request.Request('http://127.0.0.1:%d%s' % (port, path), data=body, method=method)
    try:
        with _opener.open(req, timeout=5.0) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as e:
        headers = {k.lower(): v for k, v in e.headers.items()}
        raw = e.read()
        e.close()
        return e.code, headers, raw


def query(**params):
    return '?' + urllib.parse.urlencode(params) if params else ''


def json_items(data):
    return [(d['name'], d['date']) for d in data]


def xml_items(root):
    return [(item.findtext('name') or None, item.findtext('date') or None) for item in root.find('data')]


def xml_meta(root):
    return {child.tag: child.text for child in root.find('meta')}


def ics_events(raw):
    """-> [(uid, summary or None, dtstart date, dtend date)] in calendar order."""
    cal = icalendar.Calendar.from_ical(raw)
    out = []
    for ev in cal.walk('VEVENT'):
        summary = ev.get('SUMMARY')
        out.append((str(ev['UID']), None if summary is None else str(summary), ev.decoded('DTSTART'),
                    ev.decoded('DTEND')))
    return out


def setUpModule():
    global server, custom, tmp
    tmp = tempfile.mkdtemp(prefix='sluice-e2e-holidays-')
    server = Sluice()
    path = os.path.join(tmp, 'custom.csv')
    write_file(path, csv_text(CUSTOM_ROWS))
    custom = Sluice(env={'HOLIDAYS_CSV': path})


def tearDownModule():
    for s in (server, custom):
        if s is not None:
            s.close()
    if tmp is not None:
        harness.remove_tmp(tmp)


class Checks(unittest.TestCase):
    def assertEnvelope(self, got, status, message, requests=-1, content_type=JSON_TYPE):
        """A json error (or success without data check) envelope: HTTP status = meta.status."""
        code, headers, raw = got
        self.assertEqual(code, status, raw)
        self.assertEqual(headers.get('content-type'), content_type)
        body = json.loads(raw.decode('utf-8'))
        self.assertEqual(set(body), {'meta', 'data'})
        m = body['meta']
        self.assertEqual((m['status'], m['requests'], m['method_id'], m['version'], m['method']),
                         (status, requests, 1423, 2.07, {}), m)
        if message is not None:
            self.assertEqual(m['message'], message)
        self.assertAlmostEqual(m['timestamp'], time.time(), delta=5)
        return body

    def assertJsonError(self, got, status, message, requests=-1):
        body = self.assertEnvelope(got, status, message, requests)
        self.assertEqual(body['data'], {})

    def assertXmlError(self, got, status, message, requests=-1):
        code, headers, raw = got
        self.assertEqual(code, status, raw)
        self.assertEqual(headers.get('content-type'), XML_TYPE)
        root = ET.fromstring(raw)
        m = xml_meta(root)
        self.assertEqual((m['status'], m['message'], m['requests']), (str(status), message, str(requests)))
        data = root.find('data')
        self.assertEqual((len(data), data.text), (0, None))
        self.assertIn(b'<data></data>', raw)

    def unwrap(self, raw, callback):
        text = raw.decode('utf-8')
        self.assertTrue(text.startswith(callback + '(') and text.endswith(')'), text[:200])
        return json.loads(text[len(callback) + 1:-1])


class Json(Checks):
    def get(self, suffix='.json', port=None):
        return fetch(port or server.http_port, PATH + suffix)

    def test_data_is_the_shipped_csv(self):
        code, headers, raw = self.get()
        self.assertEqual(code, 200)
        self.assertEqual(headers.get('content-type'), JSON_TYPE)
        body = json.loads(raw.decode('utf-8'))
        expected = shipped_holidays()
        self.assertEqual(len(expected), 205)
        self.assertEqual(json_items(body['data']), expected)
        self.assertIn(('New Year\u2019s Day', '2026-01-01'), json_items(body['data']))

    def test_meta(self):
        before = time.time()
        body = self.assertEnvelope(self.get(), 200, 'Request successful')
        m = body['meta']
        self.assertEqual(list(m), ['requests', 'timestamp', 'status', 'message', 'method_id', 'version', 'method'])
        self.assertEqual(m['version'], 2.07)
        self.assertIsInstance(m['timestamp'], int)
        self.assertTrue(int(before) - 1 <= m['timestamp'] <= time.time() + 1, (before, m['timestamp']))

    def test_exact_pretty_printed_text(self):
        # The API's own layout: two-space indents, no space after a colon, the empty method object as {\n\n    }.
        _, _, raw = self.get()
        text = raw.decode('utf-8')
        stamp = re.search(r'"timestamp":(\d+),', text)
        self.assertIsNotNone(stamp, text[:300])
        items = ',\n'.join('    {\n      "name":%s,\n      "date":%s\n    }'
                           % (json.dumps(n, ensure_ascii=False), json.dumps(d)) for n, d in shipped_holidays())
        expected = ('{\n  "meta":{\n    "requests":-1,\n    "timestamp":%s,\n    "status":200,\n'
                    '    "message":"Request successful",\n    "method_id":1423,\n    "version":2.07,\n'
                    '    "method":{\n\n    }\n  },\n  "data":[\n%s\n  ]\n}' % (stamp.group(1), items))
        self.assertEqual(text.rstrip('\n'), expected)
        self.assertIn('"version":2.07,', text)
        # UTF-8 as it is, not \u escapes
        self.assertIn('"New Year\u2019s Day"', text)

    def test_key_is_ignored_without_a_key_file(self):
        for key in ['anything', '']:
            with self.subTest(key=key):
                self.assertEnvelope(self.get('.json' + query(key=key)), 200, 'Request successful', -1)

    def test_nulls_and_escapes_from_a_custom_file(self):
        code, _, raw = fetch(custom.http_port, PATH + '.json')
        self.assertEqual(code, 200, raw)
        self.assertEqual(json_items(json.loads(raw.decode('utf-8'))['data']), CUSTOM_ROWS)
        text = raw.decode('utf-8')
        self.assertIn('"name":null,', text)
        self.assertIn('"date":null\n', text)


class Jsonp(Checks):
    def test_callback_wraps_the_json(self):
        code, headers, raw = fetch(server.http_port, PATH + '.json' + query(callback='myResponse'))
        self.assertEqual(code, 200, raw)
        self.assertEqual(headers.get('content-type'), JSONP_TYPE)
        body = self.unwrap(raw, 'myResponse')
        self.assertEqual(body['meta']['status'], 200)
        self.assertEqual(json_items(body['data']), shipped_holidays())
        # the wrapped text is the plain json's text
        _, _, plain = fetch(server.http_port, PATH + '.json')
        strip = lambda t: re.sub(rb'"timestamp":\d+', b'', t)  # noqa: E731
        self.assertEqual(strip(raw), b'myResponse(' + strip(plain) + b')')

    def test_dotted_paths(self):
        for callback in ['a.b_c.$d', '_', '$', 'app.onHolidays', 'x' * 128, 'A1.b2']:
            with self.subTest(callback=callback):
                code, headers, raw = fetch(server.http_port, PATH + '.json' + query(callback=callback))
                self.assertEqual((code, headers.get('content-type')), (200, JSONP_TYPE), raw[:200])
                self.assertEqual(len(self.unwrap(raw, callback)['data']), 205)

    def test_bad_callbacks_are_400(self):
        for callback in ['alert(1)', 'a-b', 'a..b', '1abc', '', 'x' * 129, '.a', 'a.', 'a b', 'a;b', 'é',
                         'a.1b', '</script>']:
            with self.subTest(callback=callback):
                got = fetch(server.http_port, PATH + '.json' + query(callback=callback))
                body = self.assertEnvelope(got, 400, None)
                self.assertTrue(body['meta']['message'].startswith('Invalid callback'), body)
                self.assertEqual(body['data'], {})

    def test_callback_is_ignored_for_xml_and_ics(self):
        for callback in ['myResponse', 'alert(1)']:
            with self.subTest(callback=callback):
                code, headers, raw = fetch(server.http_port, PATH + '.xml' + query(callback=callback))
                self.assertEqual((code, headers.get('content-type')), (200, XML_TYPE), raw[:200])
                self.assertEqual(len(xml_items(ET.fromstring(raw))), 205)
                code, headers, raw = fetch(server.http_port, PATH + '.ics' + query(callback=callback))
                self.assertEqual((code, headers.get('content-type')), (200, ICS_TYPE), raw[:200])
                self.assertTrue(raw.startswith(b'BEGIN:VCALENDAR\r\n'), raw[:100])


class Xml(Checks):
    def test_document_is_the_shipped_csv(self):
        code, headers, raw = fetch(server.http_port, PATH + '.xml')
        self.assertEqual(code, 200)
        self.assertEqual(headers.get('content-type'), XML_TYPE)
        self.assertTrue(raw.startswith(b'<?xml version="1.0" encoding="UTF-8"?>\n<response>'), raw[:100])
        root = ET.fromstring(raw)
        self.assertEqual(root.tag, 'response')
        self.assertEqual([c.tag for c in root], ['meta', 'data'])
        self.assertEqual([c.tag for c in root.find('meta')],
                         ['requests', 'timestamp', 'status', 'message', 'method_id', 'version', 'method'])
        m = xml_meta(root)
        self.assertEqual((m['requests'], m['status'], m['message'], m['method_id'], m['version'], m['method']),
                         ('-1', '200', 'Request successful', '1423', '2.07', None))
        self.assertAlmostEqual(int(m['timestamp']), time.time(), delta=5)
        for item in root.find('data'):
            self.assertEqual((item.tag, [c.tag for c in item]), ('item', ['name', 'date']))
        self.assertEqual(xml_items(root), shipped_holidays())

    def test_escapes_and_empty_elements(self):
        code, _, raw = fetch(custom.http_port, PATH + '.xml')
        self.assertEqual(code, 200, raw)
        self.assertIn('<name>Quote "inside" &amp; &lt;tag&gt;</name>'.encode(), raw.replace(b'&quot;', b'"'))
        self.assertIn(b'<name></name>', raw)
        self.assertIn(b'<date></date>', raw)
        self.assertEqual(xml_items(ET.fromstring(raw)), CUSTOM_ROWS)


class Ics(Checks):
    def get(self, s=None):
        code, headers, raw = fetch((s or server).http_port, PATH + '.ics')
        self.assertEqual(code, 200, raw[:300])
        self.assertEqual(headers.get('content-type'), ICS_TYPE)
        return raw

    def assertRfc5545Lines(self, raw):
        self.assertTrue(raw.endswith(b'\r\n'))
        self.assertEqual(raw.count(b'\n'), raw.count(b'\r\n'), 'a bare LF')
        self.assertEqual(raw.count(b'\r'), raw.count(b'\r\n'), 'a bare CR')
        lines = raw[:-2].split(b'\r\n')
        for i, line in enumerate(lines):
            self.assertLessEqual(len(line), 75, line)
            line.decode('utf-8')  # a fold never cuts a character
            self.assertTrue(line, 'an empty line at %d' % i)
        return lines

    def test_calendar_is_the_shipped_csv(self):
        raw = self.get()
        lines = self.assertRfc5545Lines(raw)
        self.assertEqual(lines[:2], [b'BEGIN:VCALENDAR', b'VERSION:2.0'])
        self.assertTrue(lines[2].startswith(b'PRODID:'), lines[2])
        self.assertEqual(lines[-1], b'END:VCALENDAR')
        events = ics_events(raw)
        expected = shipped_holidays()
        self.assertEqual(len(events), 205)
        self.assertEqual([(s, d.isoformat()) for _, s, d, _ in events], expected)
        for uid, summary, start, end in events:
            self.assertIsInstance(start, datetime.date)
            self.assertEqual(end - start, datetime.timedelta(days=1), summary)
        self.assertIn(('New Year\u2019s Day', datetime.date(2026, 1, 1)), [(s, d) for _, s, d, _ in events])

    def test_event_properties(self):
        raw = self.get()
        self.assertEqual(raw.count(b'BEGIN:VEVENT\r\n'), 205)
        for block in raw.split(b'BEGIN:VEVENT\r\n')[1:]:
            block = block.split(b'END:VEVENT\r\n')[0]
            names = [line.split(b':')[0] for line in block.split(b'\r\n') if line and not line.startswith(b' ')]
            for prop in [b'UID', b'DTSTAMP', b'DTSTART;VALUE=DATE', b'DTEND;VALUE=DATE', b'SUMMARY']:
                self.assertEqual(names.count(prop), 1, (prop, block))
            self.assertRegex(block, rb'(?m)^DTSTAMP:\d{8}T\d{6}Z\r$')
            self.assertRegex(block, rb'(?m)^DTSTART;VALUE=DATE:\d{8}\r$')

    def test_uids_unique_and_stable(self):
        first = [uid for uid, _, _, _ in ics_events(self.get())]
        self.assertEqual(len(set(first)), len(first))
        second = [uid for uid, _, _, _ in ics_events(self.get())]
        self.assertEqual(first, second)

    def test_folding_escaping_and_nulls(self):
        raw = self.get(custom)
        lines = self.assertRfc5545Lines(raw)
        folded = [line for line in lines if line.startswith(b' ')]
        self.assertGreaterEqual(len(folded), 4, 'the long names were not folded')
        # folding joins back (RFC 5545 §3.1: remove CRLF + one space) to the escaped SUMMARY lines
        unfolded = raw.replace(b'\r\n ', b'').decode('utf-8').split('\r\n')
        self.assertIn('SUMMARY:Comma\\, semicolon\\; and back\\\\slash', unfolded)
        for name in [LONG_2, LONG_3, LONG_4, LONG_ASCII]:
            self.assertIn('SUMMARY:' + name, unfolded)
        events = ics_events(raw)
        with_date = [(n, d) for n, d in CUSTOM_ROWS if d is not None]
        self.assertEqual([(s, d.isoformat()) for _, s, d, _ in events], with_date)
        # the event of an empty name has no SUMMARY at all
        self.assertEqual(sum(1 for line in unfolded if line.startswith('SUMMARY')), len(with_date) - 1)
        uids = [uid for uid, _, _, _ in events]
        self.assertEqual(len(set(uids)), len(uids), uids)
        # docs/holidays.md: <yyyymmdd>-<slug of the name>, -2, -3... for a repeat, `holiday` without a name
        self.assertEqual(uids[6:9], ['20300107-holiday@holidays.sluice', '20300108-new-years-day@holidays.sluice',
                                     '20300108-new-years-day-2@holidays.sluice'])
        ends = {s: e for _, s, _, e in events}
        self.assertEqual(ends['Leap eve'], datetime.date(2028, 2, 29))
        self.assertEqual(ends['Not leap'], datetime.date(2030, 3, 1))
        self.assertEqual(ends['Year end'], datetime.date(2031, 1, 1))


class Errors(Checks):
    def test_unknown_format_is_501(self):
        for suffix in ['.csv', '', '.JSON', '.json2', '.ics.json', '/x.json', '.csv?callback=cb', '.txt?key=k']:
            with self.subTest(suffix=suffix):
                self.assertJsonError(fetch(server.http_port, PATH + suffix), 501, 'Invalid method')

    def test_post_is_405(self):
        for suffix, xml in [('.json', False), ('.ics', False), ('.xml', True)]:
            with self.subTest(suffix=suffix):
                got = fetch(server.http_port, PATH + suffix, method='POST', body=b'')
                self.assertEqual(got[1].get('allow'), 'GET')
                if xml:
                    code, _, raw = got
                    self.assertEqual(code, 405)
                    self.assertEqual(xml_meta(ET.fromstring(raw))['status'], '405')
                else:
                    body = self.assertEnvelope(got, 405, None)
                    self.assertEqual(body['data'], {})

    def test_disabled_api_is_404(self):
        with Sluice(env={'HOLIDAYS_ENABLED': 'false'}) as s:
            for suffix in ['.json', '.xml', '.ics']:
                with self.subTest(suffix=suffix):
                    self.assertEqual(fetch(s.http_port, PATH + suffix)[0], 404)
            self.assertEqual(s.healthcheck()[0], 200)


class KeyedServer(Checks):
    """One server per class with KEYS in API_KEYS_FILE and the class's `env`."""
    env = {}

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix='sluice-e2e-holidays-keys-')
        keys = os.path.join(cls.dir, 'api_keys.yaml')
        write_file(keys, KEYS)
        cls.server = Sluice(env=dict(cls.env, API_KEYS_FILE=keys))

    @classmethod
    def tearDownClass(cls):
        cls.server.close()
        harness.remove_tmp(cls.dir)

    def get(self, suffix='.json', **params):
        return fetch(self.server.http_port, PATH + suffix + query(**params))


class RequiredKeys(KeyedServer):
    env = {'HOLIDAYS_REQUIRE_KEY': 'true'}

    def test_missing_key_is_511(self):
        self.assertJsonError(self.get(), 511, 'API key is required (?key=)')
        self.assertJsonError(self.get(key=''), 511, 'API key is required (?key=)')
        self.assertJsonError(self.get(api_key='plain'), 511, 'API key is required (?key=)')
        self.assertEqual(self.get('.ics')[0], 511)

    def test_unknown_key_is_401(self):
        for key in ['nope', 'PLAIN', 'plain ']:
            with self.subTest(key=key):
                self.assertJsonError(self.get(key=key), 401, 'Invalid API key')
        self.assertEqual(self.get('.ics', key='nope')[0], 401)

    def test_banned_key_is_403(self):
        self.assertJsonError(self.get(key='banned-key'), 403, 'The provided API key has been banned', requests=0)
        self.assertEqual(self.get('.ics', key='banned-key')[0], 403)

    def test_xml_errors(self):
        self.assertXmlError(self.get('.xml'), 511, 'API key is required (?key=)')
        self.assertXmlError(self.get('.xml', key='nope'), 401, 'Invalid API key')
        self.assertXmlError(self.get('.xml', key='banned-key'), 403, 'The provided API key has been banned', 0)

    def test_errors_with_a_callback_are_wrapped(self):
        for params, status, message in [({}, 511, 'API key is required (?key=)'),
                                        ({'key': 'nope'}, 401, 'Invalid API key'),
                                        ({'key': 'banned-key'}, 403, 'The provided API key has been banned')]:
            with self.subTest(params=params):
                code, headers, raw = self.get(callback='cb', **params)
                self.assertEqual((code, headers.get('content-type')), (status, JSONP_TYPE), raw)
                body = self.unwrap(raw, 'cb')
                self.assertEqual((body['meta']['status'], body['meta']['message'], body['data']),
                                 (status, message, {}))

    def test_valid_keys_count_their_requests(self):
        # each key has its own count, from 1
        for n in (1, 2, 3):
            body = self.assertEnvelope(self.get(key='count-one'), 200, 'Request successful', requests=n)
            self.assertEqual(json_items(body['data']), shipped_holidays())
        self.assertEnvelope(self.get(key='count-two'), 200, 'Request successful', requests=1)
        self.assertEnvelope(self.get(key='count-one'), 200, 'Request successful', requests=4)
        self.assertEnvelope(self.get(key='count-two'), 200, 'Request successful', requests=2)

    def test_valid_key_in_every_format(self):
        code, _, raw = self.get('.xml', key='xml-key')
        self.assertEqual(code, 200, raw)
        root = ET.fromstring(raw)
        self.assertEqual(xml_meta(root)['requests'], '1')
        self.assertEqual(xml_items(root), shipped_holidays())
        code, headers, raw = self.get('.ics', key='plain')
        self.assertEqual((code, headers.get('content-type')), (200, ICS_TYPE))
        self.assertEqual(len(ics_events(raw)), 205)
        code, headers, raw = self.get(key='wrapped', callback='cb')
        self.assertEqual((code, headers.get('content-type')), (200, JSONP_TYPE))
        body = self.unwrap(raw, 'cb')
        self.assertEqual((body['meta']['status'], body['meta']['requests']), (200, 1))


class OptionalKeys(KeyedServer):
    """Keys not required (the default) but a key file given."""

    def test_no_key_or_an_unknown_key_is_served_uncounted(self):
        for params in [{}, {'key': ''}, {'key': 'nope'}, {'key': 'nope'}]:
            with self.subTest(params=params):
                body = self.assertEnvelope(self.get(**params), 200, 'Request successful', requests=-1)
                self.assertEqual(len(body['data']), 205)

    def test_a_valid_key_is_counted(self):
        self.assertEnvelope(self.get(key='count-one'), 200, 'Request successful', requests=1)
        self.assertEnvelope(self.get(key='count-one'), 200, 'Request successful', requests=2)
        self.assertEnvelope(self.get(key='count-two'), 200, 'Request successful', requests=1)
        self.assertEnvelope(self.get(key='count-one'), 200, 'Request successful', requests=3)


class Loader(Checks):
    """Accepted CSV shapes: each file is served as the expected list."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix='sluice-e2e-holidays-csv-')
        self.addCleanup(harness.remove_tmp, self.dir)

    def served(self, data):
        path = os.path.join(self.dir, 'h.csv')
        write_file(path, data)
        with Sluice(env={'HOLIDAYS_CSV': path}) as s:
            code, _, raw = fetch(s.http_port, PATH + '.json')
            self.assertEqual(code, 200, raw)
            return json_items(json.loads(raw.decode('utf-8'))['data'])

    def test_accepted_files(self):
        cases = [
            ('steward header', 'date,holiday\n2030-01-01,A\n2030-02-01,B\n',
             [('A', '2030-01-01'), ('B', '2030-02-01')]),
            ('any case, extra columns', 'Year,DATE,Notes,Name\n2030,2030-01-01,x,A\n2031,2031-01-01,,B\n',
             [('A', '2030-01-01'), ('B', '2031-01-01')]),
            ('holiday in capitals', 'HOLIDAY,Date\nA,2030-01-01\n', [('A', '2030-01-01')]),
            ('BOM and CRLF', '\ufeffname,date\r\nA,2030-01-01\r\nB,2030-01-02\r\n',
             [('A', '2030-01-01'), ('B', '2030-01-02')]),
            ('RFC 4180 quoting', 'name,date\n"A, ""B""","2030-01-01"\n"",2030-01-02\nC,""\n',
             [('A, "B"', '2030-01-01'), (None, '2030-01-02'), ('C', None)]),
            ('no final newline', 'name,date\nA,2030-01-01', [('A', '2030-01-01')]),
            ('order kept', 'name,date\nLater,2031-01-01\nEarlier,2030-01-01\n',
             [('Later', '2031-01-01'), ('Earlier', '2030-01-01')]),
        ]
        for label, data, expected in cases:
            with self.subTest(label):
                self.assertEqual(self.served(data), expected)


class BadStart(unittest.TestCase):
    """A bad HOLIDAYS_CSV (or keys required without a key file) stops start-up with exit code 1."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix='sluice-e2e-holidays-bad-')
        self.addCleanup(harness.remove_tmp, self.dir)

    def start_failing(self, env):
        return Sluice.failed_start(self, env)

    def test_bad_files(self):
        cases = [
            ('utf8', b'name,date\nA,2030-01-01\n\xff\xfe,2030-01-02\n', 'line 3: not valid UTF-8'),
            ('fields', 'name,date\nA,2030-01-01\nB,2030-01-02,extra\n', 'line 3: 3 fields, the header has 2'),
            ('few fields', 'name,date\nA\n', 'line 2: 1 field, the header has 2'),
            ('month', 'name,date\nA,2012-13-01\n', "line 2: date '2012-13-01' is not a Y-m-d calendar date"),
            ('feb 29', 'name,date\nA,2030-01-01\nB,2013-02-29\n',
             "line 3: date '2013-02-29' is not a Y-m-d calendar date"),
            ('format', 'name,date\nA,2012/01/01\n', "line 2: date '2012/01/01' is not a Y-m-d calendar date"),
            ('quote', 'name,date\n"A,2030-01-01\nB,2030-01-02\n', 'line 2: a quoted field is not closed'),
            ('header', 'title,day\nA,2030-01-01\n', 'line 1: the header needs a name (or holiday) and a date column'),
            ('header only', 'name,date\n', 'the file has a header but no holidays'),
            ('control', 'name,date\n"A\nB",2030-01-01\n', 'line 2: the name contains a control character'),
        ]
        for label, data, message in cases:
            with self.subTest(label):
                path = os.path.join(self.dir, label.replace(' ', '_') + '.csv')
                write_file(path, data)
                log = self.start_failing({'HOLIDAYS_CSV': path})
                self.assertIn('HOLIDAYS_CSV: %s: %s' % (path, message), log)

    def test_missing_file(self):
        path = os.path.join(self.dir, 'missing.csv')
        self.assertIn('HOLIDAYS_CSV: %s: cannot read the file' % path, self.start_failing({'HOLIDAYS_CSV': path}))

    def test_keys_required_without_a_key_file(self):
        log = self.start_failing({'HOLIDAYS_REQUIRE_KEY': 'true'})
        self.assertIn('API_KEYS_FILE is required when HOLIDAYS_REQUIRE_KEY=true', log)


class Reload(Checks):
    """Each test gets its own server and file, so edits do not leak between tests."""

    FIRST = [('First', '2030-01-01'), ('Second', '2030-02-01')]

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix='sluice-e2e-holidays-reload-')
        self.addCleanup(harness.remove_tmp, self.dir)
        self.path = os.path.join(self.dir, 'holidays.csv')
        write_file(self.path, csv_text(self.FIRST))
        # LOG_LEVEL unset: a refused reload must be logged at the default level
        self.server = Sluice(env={'HOLIDAYS_CSV': self.path, 'LOG_LEVEL': None})
        self.addCleanup(self.server.close)

    def items(self):
        code, _, raw = fetch(self.server.http_port, PATH + '.json')
        self.assertEqual(code, 200, raw)
        return json_items(json.loads(raw.decode('utf-8'))['data'])

    def wait_items(self, expected):
        harness.wait_until(lambda: self.items() == expected, timeout=5.0, message='the list %r served' % expected,
                           describe=self.server.log_tail)

    def ics(self):
        code, _, raw = fetch(self.server.http_port, PATH + '.ics')
        self.assertEqual(code, 200)
        return ics_events(raw)

    def test_rewritten_in_place(self):
        self.assertEqual(self.items(), self.FIRST)
        rows = self.FIRST + [('Third', '2030-03-01')]
        write_file(self.path, csv_text(rows))
        self.wait_items(rows)
        code, _, raw = fetch(self.server.http_port, PATH + '.xml')
        self.assertEqual(xml_items(ET.fromstring(raw)), rows)
        self.assertEqual([(s, d.isoformat()) for _, s, d, _ in self.ics()], rows)

    def test_replaced(self):
        rows = [('Only', '2031-05-05')]
        write_atomically(self.path, csv_text(rows))
        self.wait_items(rows)
        rows = [('Steward', '2032-06-06')]
        write_atomically(self.path, 'date,holiday\n2032-06-06,Steward\n')
        self.wait_items(rows)

    def test_uids_survive_a_reload(self):
        before = {s: uid for uid, s, _, _ in self.ics()}
        rows = self.FIRST + [('Third', '2030-03-01')]
        write_atomically(self.path, csv_text(rows))
        self.wait_items(rows)
        after = {s: uid for uid, s, _, _ in self.ics()}
        self.assertEqual({s: after[s] for s in before}, before)
        self.assertEqual(len(set(after.values())), 3)

    def test_bad_rewrite_keeps_the_previous_list(self):
        cases = [
            ('name,date\nA,2030-01-01\nB,2030-01-02,x\n', 'line 3: 3 fields, the header has 2'),
            ('name,date\nA,2012-13-01\n', "line 2: date '2012-13-01' is not a Y-m-d calendar date"),
            (b'name,date\n\xc3,2030-01-01\n', 'line 2: not valid UTF-8'),
        ]
        for data, message in cases:
            with self.subTest(message=message):
                since = len(self.server.log())
                write_atomically(self.path, data)
                self.server.wait_for_log('%s: %s (keeping what was loaded before)' % (self.path, message),
                                         since=since, timeout=5.0)
                self.assertEqual(self.items(), self.FIRST)
        # in place, too
        since = len(self.server.log())
        write_file(self.path, 'name,date\n')
        self.server.wait_for_log('%s: the file has a header but no holidays (keeping what was loaded before)'
                                 % self.path, since=since, timeout=5.0)
        self.assertEqual(self.items(), self.FIRST)
        # a good file again is picked up
        rows = [('Back', '2033-01-01')]
        write_atomically(self.path, csv_text(rows))
        self.wait_items(rows)


class ReloadLog(Checks):
    """What a reload logs, at LOG_LEVEL=info to see the good reload's line too."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix='sluice-e2e-holidays-log-')
        self.addCleanup(harness.remove_tmp, self.dir)
        self.path = os.path.join(self.dir, 'holidays.csv')
        write_file(self.path, csv_text(Reload.FIRST))
        self.server = Sluice(env={'HOLIDAYS_CSV': self.path, 'LOG_LEVEL': 'info'})
        self.addCleanup(self.server.close)

    def touch_a_neighbour(self, times=8):
        """Changes another file of the directory, each change past the 100 ms debounce (as a log file there)."""
        for i in range(times):
            write_file(os.path.join(self.dir, 'sluice.log'), 'line %d\n' % i)
            time.sleep(0.15)
        time.sleep(0.3)

    def test_a_failed_reload_is_logged_once_per_change_of_the_file(self):
        error = ("%s: line 2: date '2012-13-01' is not a Y-m-d calendar date (keeping what was loaded before)"
                 % self.path)
        write_atomically(self.path, 'name,date\nA,2012-13-01\n')
        self.server.wait_for_log(error, timeout=5.0)
        self.touch_a_neighbour()
        self.assertEqual(self.server.log().count(error), 1, self.server.log_tail())
        # Another broken text, the same message: a new change, logged once more.
        write_atomically(self.path, 'name,date\nA,2012-13-01\nB,2030-01-01\n')
        harness.wait_until(lambda: self.server.log().count(error) == 2, timeout=5.0, message='logged again',
                           describe=self.server.log_tail)
        self.touch_a_neighbour()
        self.assertEqual(self.server.log().count(error), 2, self.server.log_tail())
        since = len(self.server.log())
        write_atomically(self.path, csv_text([('Back', '2033-01-01')]))
        self.server.wait_for_log('%s: loaded 1 holidays' % self.path, since=since, timeout=5.0)
        self.assertEqual(self.server.log().count(error), 2)


if __name__ == '__main__':
    unittest.main()

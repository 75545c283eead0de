// Reads {"name": value, ...} (JSON) on stdin and prints each field parsed as an RFC 9651 List with the
// structured-headers package: {"name": [[item, {param: value}], ...]}, or {"name": {"error": message}}.
import { parseList } from 'structured-headers';

let input = '';
for await (const chunk of process.stdin) input += chunk;
const out = {};
for (const [name, value] of Object.entries(JSON.parse(input))) {
  try {
    out[name] = parseList(value).map(([item, params]) => [
      typeof item === 'object' && item !== null && 'value' in item ? item.value : String(item),
      Object.fromEntries(params),
    ]);
  } catch (e) {
    out[name] = { error: String(e.message || e) };
  }
}
process.stdout.write(JSON.stringify(out));

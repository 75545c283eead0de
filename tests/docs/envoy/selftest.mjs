#!/usr/bin/env node
// Proves that check_envoy_snippets.mjs can fail: each broken fixture in fixtures/ must fail with the messages listed
// here (file:line included), fixtures/valid.md must pass and report its newer fields, and a table entry that the
// bundled protos already have must stop the checker at start-up.
//
//   node tests/docs/envoy/selftest.mjs [-v]       (-v: print the checker's output for every fixture)
//
// Ends with `N passed, M failed`; exit status 0 when every case passed.

import path from "node:path";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { checkFiles, loadProtos, verifyTables } from "./check_envoy_snippets.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const fixtures = path.join(here, "fixtures");
const verbose = process.argv.includes("-v");

// Each fixture and what the checker must say about it: `err` lines on stderr, `out` lines on stdout, both given
// as what follows the fixture's path.
const cases = [
  { file: "bad-unknown-field.md",
    err: [":6: envoy.extensions.filters.http.ratelimit.v3.RateLimit has no field 'domian' (path domian)"] },
  { file: "bad-any-field.md",
    err: [":12: envoy.extensions.filters.http.ratelimit.v3.RateLimit has no field 'failure_mode_dney' (path http_filters[0].typed_config.failure_mode_dney)"] },
  { file: "bad-list-for-message.md",
    err: [":8: envoy.config.ratelimit.v3.RateLimitServiceConfig is written as a map of its fields, found a list (path rate_limit_service)"] },
  { file: "bad-enum.md",
    err: [":7: envoy.extensions.filters.http.ratelimit.v3.RateLimit.XRateLimitHeadersRFCVersion has no value 'DRAFT_VERSION_04'"] },
  { file: "bad-yaml.md", err: [":8: YAML: "] },
  { file: "bad-unknown-type.md",
    err: [":9: unknown @type type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimitt"] },
  { file: "bad-newer-field.md",
    err: [":7: envoy.config.route.v3.RateLimit.HitsAddend has no field 'numbr' (path [0].hits_addend.numbr)"] },
  { file: "bad-values.md",
    err: [":7: a google.protobuf.Duration is a string of seconds",
      ":8: envoy.extensions.filters.http.ratelimit.v3.RateLimit.response_headers_to_add is a repeated field: expected a list, found a scalar",
      ":11: envoy.config.route.v3.RateLimit.Action: 'generic_key' and 'remote_address' are both in oneof action_specifier"] },
  { file: "bad-markers.md",
    err: [":3: the envoy marker is not followed by a ```yaml block",
      ":10: the marker names envoy.extensions.filters.http.ratelimit.v3.RateLimitt, which is no message of the bundled API",
      ":16: malformed envoy marker"] },
  { file: "valid.md", pass: true,
    out: [":15: envoy.config.route.v3.RateLimit.hits_addend is newer than the bundled API (Envoy 1.33)",
      ":16: envoy.config.route.v3.RateLimit.apply_on_stream_done is newer than the bundled API (Envoy 1.33)",
      ":17: envoy.config.route.v3.RateLimit.HitsAddend.is_negative_hits is newer than the bundled API (Envoy 1.38)",
      ":13: envoy.extensions.filters.http.ratelimit.v3.RateLimit.rate_limits is newer than the bundled API (Envoy 1.36)",
      ":40: envoy.extensions.filters.http.ratelimit.v3.RateLimitPerRoute.rate_limits is newer than the bundled API (Envoy 1.33",
      ":42: envoy.extensions.filters.http.api_key_auth.v3.ApiKeyAuth is newer than the bundled API (Envoy 1.33)",
      "3 snippets checked, 0 failed"] },
];

let passed = 0;
let failed = 0;
const result = (name, problems) => {
  if (problems.length) {
    failed++;
    console.log(`FAIL ${name}`);
    for (const p of problems) console.log(`  ${p}`);
  } else {
    passed++;
    console.log(`ok ${name}`);
  }
};

// The fixtures run in this process (the protos load once); the command line is tried once below.
const { root } = loadProtos();
const tables = verifyTables(root);
for (const c of cases) {
  const file = path.join(fixtures, c.file);
  const out = [];
  const err = [];
  const { failed: snippetsFailed } = checkFiles([file], root, tables, (l) => out.push(l), (l) => err.push(l));
  if (verbose) for (const l of [...out, ...err]) console.log(`    | ${l}`);
  const problems = [];
  if (c.pass ? snippetsFailed : !snippetsFailed) problems.push(c.pass ? `failed: ${err.join(" / ")}` : "passed");
  if (c.pass && err.length) problems.push(`printed problems: ${err.join(" / ")}`);
  for (const want of c.err ?? []) {
    if (!err.some((l) => l.startsWith(file + want))) problems.push(`no message ${want}`);
  }
  for (const want of c.out ?? []) {
    if (!out.some((l) => l.replace(/^ {2}info: /, "").startsWith(want.startsWith(":") ? file + want : want))) problems.push(`no line ${want}`);
  }
  result(c.file, problems);
}

// The exit status of the command line: 1 for a broken fixture, 0 for the valid one.
for (const [file, want] of [["bad-unknown-field.md", 1], ["valid.md", 0]]) {
  const r = spawnSync(process.execPath, [path.join(here, "check_envoy_snippets.mjs"), path.join(fixtures, file)], { encoding: "utf8" });
  result(`exit status ${want} for ${file}`, r.status === want ? [] : [`exit status ${r.status}: ${r.stderr.trim()}`]);
}

// The tables must stay honest: an entry for a field, retyped field or type that the protos already have stops
// the checker at start-up.
const stale = [
  ["a field the protos have", { "envoy.config.route.v3.RateLimit": { stage: { envoy: "1.0", type: "uint32" } } }, {},
    "envoy.config.route.v3.RateLimit.stage is in the bundled API already"],
  ["a retyped field with the protos' type", { "envoy.config.route.v3.RateLimit": { actions: { envoy: "1.0", type: "envoy.config.route.v3.RateLimit.Action", repeated: true, retyped: true } } }, {},
    "envoy.config.route.v3.RateLimit.actions has type envoy.config.route.v3.RateLimit.Action in the bundled API already"],
  ["a type the protos have", {}, { "envoy.extensions.filters.http.ratelimit.v3.RateLimit": "1.0" },
    "NEWER_TYPES: envoy.extensions.filters.http.ratelimit.v3.RateLimit is in the bundled API already"],
];
for (const [name, fields, types, want] of stale) {
  let message = "";
  try {
    verifyTables(root, fields, types);
  } catch (e) {
    message = e.message;
  }
  result(`stale table entry: ${name}`, message.includes(want) ? [] : [`expected "${want}", got "${message}"`]);
}

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);

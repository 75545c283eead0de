#pragma once
// Pieces of the Prometheus text exposition format 0.0.4 (and statsd_exporter's name escaping), kept apart
// from the exporter so each rule can be tested on its own.

#include <string>
#include <string_view>

namespace sluice::stats {

// statsd_exporter's EscapeMetricName: every character but [a-zA-Z0-9_] becomes '_' (a run of '-' one '_', a
// multi-byte UTF-8 character one '_'), and a leading digit gets a '_' in front.
std::string escape_metric_name(std::string_view name);

// A label value between its quotes: '\', '"' and newline escaped; bytes that are not valid UTF-8 become
// U+FFFD, because Prometheus rejects a whole scrape over one bad label value.
void append_label_value(std::string& out, std::string_view value);

// # HELP text: '\' and newline escaped.
void append_help(std::string& out, std::string_view text);

// A sample value or bucket bound as Go's strconv 'g' would print it (shortest round trip), except that whole
// numbers below 2^53 are written without an exponent: 1000000, not 1e+06. Also +Inf, -Inf, NaN.
void append_number(std::string& out, double v);

}  // namespace sluice::stats

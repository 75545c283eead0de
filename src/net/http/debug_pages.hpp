#pragma once
// The debug server's routing: each page has a path and a one-line help; "/" and every unknown path answer the
// sorted "<path>: <help>" list, as upstream's debug server does. Also the /debug/pprof/ pages (CPU and heap
// profiles from gperftools, read by `google-pprof`).

#include <string>
#include <vector>

#include "net/http/host_check.hpp"
#include "net/http/router.hpp"

namespace sluice::net::http {

struct debug_page {
  std::string path;
  std::string help;
  handler handle;
};

// /debug/pprof/ (index), /debug/pprof/profile?seconds=N (CPU, default 30) and /debug/pprof/heap?seconds=N
// (allocations live at the end of the window, default 10).
std::vector<debug_page> pprof_pages();

// Adds the pages and the listing, each behind `hosts` (host_check.hpp): a refused Host answers 403. A page
// that throws core::workers_stopped (it reads the workers while they stop) answers 503 "shutting down".
void add_debug_pages(router& routes, std::vector<debug_page> pages, host_check hosts = host_check());

}  // namespace sluice::net::http

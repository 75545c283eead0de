#pragma once
// The xDS client of CONFIG_TYPE=GRPC_XDS_SOTW: one ADS stream (StreamAggregatedResources, wildcard, SotW) to
// CONFIG_GRPC_XDS_SERVER_URL. gRPC C++'s blocking stream runs on a thread of its own; each response is handed
// to the control thread (`target`, through `control`), where it replaces the whole rule set as a file reload
// does, and the thread then ACKs or NACKs it. A stream that ends (the server gone, refused, reset) is opened
// again after the backoff. No worker ever waits on it.

#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ratelimit/config/yaml_loader.hpp"
#include "ratelimit/xds/backoff.hpp"
#include "ratelimit/xds/sotw_session.hpp"

namespace grpc {
class ClientContext;
}

namespace sluice::ratelimit::xds {

struct client_settings {
  node_identity node;                                        // CONFIG_GRPC_XDS_NODE_ID, _NODE_METADATA
  std::string server_url = "localhost:18000";                // CONFIG_GRPC_XDS_SERVER_URL
  std::vector<std::pair<std::string, std::string>> headers;  // CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS
  bool use_tls = false;                                      // CONFIG_GRPC_XDS_SERVER_USE_TLS
  std::string ca_pem;           // CONFIG_GRPC_XDS_SERVER_TLS_CACERT's content, after the system's CAs
  std::string client_cert_pem;  // CONFIG_GRPC_XDS_CLIENT_TLS_CERT's content
  std::string client_key_pem;   // CONFIG_GRPC_XDS_CLIENT_TLS_KEY's content
  std::string server_san;    // CONFIG_GRPC_XDS_SERVER_TLS_SAN: the name checked in the server's certificate
  backoff_settings backoff;  // XDS_CLIENT_BACKOFF_*
  std::size_t max_receive_bytes = 0;  // XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES: 0 = gRPC's 4 MiB
};

// Where responses go, on the control thread.
struct rules_target {
  // The rule files of a response: -> the error that refuses them (NACK), or nothing (ACK).
  std::function<std::optional<std::string>(std::vector<config::config_file>)> apply;
  // A response that holds no readable rules (NACKed): counted and logged as a failed load.
  std::function<void(const std::string&)> refuse;
};

class client {
 public:
  client(client_settings settings, boost::asio::any_io_executor control, rules_target target);
  ~client();
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  void start();
  // Ends the stream and joins the thread. Call on the control thread (or after it stopped).
  void stop();
  // Opens a new stream at once (the server sends its rules again on it): a NACKed response cannot be taken
  // back, so rules refused for a reason that has since gone are asked for again. Any thread.
  void ask_again();

 private:
  void run();
  // One stream, until it ends or stop(). -> whether it received a response.
  bool run_stream();
  // Runs the target on the control thread and waits for it: -> the NACK's error, or nothing for an ACK.
  std::optional<std::optional<std::string>> on_control(std::function<std::optional<std::string>()> work);

  client_settings settings_;
  boost::asio::any_io_executor control_;
  rules_target target_;
  sotw_session session_;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool again_ = false;  // ask_again(): the stream ends and the next one opens without a wait
  grpc::ClientContext* context_ = nullptr;  // the stream's, while it is open
};

}  // namespace sluice::ratelimit::xds

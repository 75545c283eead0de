#include "h2_loopback.hpp"

#include <zlib.h>

#include <cstring>
#include <stdexcept>

namespace sluice::test {

std::string gzip(const std::string& in) {
  z_stream z{};
  deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  std::string out(compressBound(static_cast<uLong>(in.size())) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

h2_client::h2_client() {
  nghttp2_session_callbacks* cbs = nullptr;
  nghttp2_session_callbacks_new(&cbs);
  nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
  nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_close);
  if (nghttp2_session_client_new(&ng_, cbs, this) != 0) throw std::runtime_error("nghttp2 client");
  nghttp2_session_callbacks_del(cbs);
  nghttp2_submit_settings(ng_, NGHTTP2_FLAG_NONE, nullptr, 0);
}

h2_client::~h2_client() {
  nghttp2_session_del(ng_);
}

std::string h2_client::frame(const std::string& payload, bool compressed) {
  std::string out(5, '\0');
  out[0] = compressed ? 1 : 0;
  const auto n = payload.size();
  out[1] = static_cast<char>(n >> 24);
  out[2] = static_cast<char>(n >> 16);
  out[3] = static_cast<char>(n >> 8);
  out[4] = static_cast<char>(n);
  return out + payload;
}

std::int32_t h2_client::request(const std::vector<std::pair<std::string, std::string>>& headers,
                                std::string body, const std::string& method) {
  auto source = std::make_unique<body_source>();
  source->data = std::move(body);
  return submit(headers, std::move(source), method);
}

std::int32_t h2_client::open(const std::vector<std::pair<std::string, std::string>>& headers) {
  auto source = std::make_unique<body_source>();
  source->ended = false;
  return submit(headers, std::move(source), "POST");
}

void h2_client::send(std::int32_t id, const std::string& data, bool end) {
  auto& source = *bodies_.at(id);
  source.data += data;
  source.ended = end;
  nghttp2_session_resume_data(ng_, id);
}

std::int32_t h2_client::submit(const std::vector<std::pair<std::string, std::string>>& headers,
                               std::unique_ptr<body_source> source, const std::string& method) {
  std::vector<std::pair<std::string, std::string>> all = {
      {":method", method}, {":scheme", "http"}, {":authority", "test"}};
  all.insert(all.end(), headers.begin(), headers.end());
  std::vector<nghttp2_nv> nva;
  for (auto& [n, v] : all) {
    nva.push_back({reinterpret_cast<std::uint8_t*>(n.data()), reinterpret_cast<std::uint8_t*>(v.data()),
                   n.size(), v.size(), NGHTTP2_NV_FLAG_NONE});
  }
  nghttp2_data_provider provider{};
  provider.source.ptr = source.get();
  provider.read_callback = read_body;
  std::int32_t id = nghttp2_submit_request(ng_, nullptr, nva.data(), nva.size(), &provider, this);
  if (id < 0) throw std::runtime_error("nghttp2_submit_request");
  bodies_[id] = std::move(source);
  return id;
}

void h2_client::reset(std::int32_t id) {
  nghttp2_submit_rst_stream(ng_, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
}

std::string h2_client::take_output() {
  std::string out;
  const std::uint8_t* data = nullptr;
  for (ssize_t n; (n = nghttp2_session_mem_send(ng_, &data)) > 0;)
    out.append(reinterpret_cast<const char*>(data), n);
  return out;
}

bool h2_client::receive(std::string_view bytes) {
  return nghttp2_session_mem_recv(ng_, reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()) >=
         0;
}

void h2_client::pump(net::h2::session& server, boost::asio::io_context& io) {
  for (int round = 0; round < 1000; ++round) {
    bool moved = false;
    const std::uint8_t* data = nullptr;
    for (ssize_t n; (n = nghttp2_session_mem_send(ng_, &data)) > 0;) {
      moved = true;
      server.feed({data, static_cast<std::size_t>(n)});
    }
    std::string out;
    server.drain(out);
    if (!out.empty()) {
      moved = true;
      nghttp2_session_mem_recv(ng_, reinterpret_cast<const std::uint8_t*>(out.data()), out.size());
    }
    if (io.poll() > 0) moved = true;
    if (!moved) return;
  }
}

ssize_t h2_client::read_body(nghttp2_session*, std::int32_t, std::uint8_t* buf, std::size_t length,
                             std::uint32_t* flags, nghttp2_data_source* source, void*) {
  auto* s = static_cast<body_source*>(source->ptr);
  const std::size_t n = std::min(length, s->data.size() - s->offset);
  std::memcpy(buf, s->data.data() + s->offset, n);
  s->offset += n;
  if (s->offset == s->data.size()) {
    if (!s->ended) {
      if (n == 0) return NGHTTP2_ERR_DEFERRED;
      return static_cast<ssize_t>(n);
    }
    *flags |= NGHTTP2_DATA_FLAG_EOF;
  }
  return static_cast<ssize_t>(n);
}

int h2_client::on_begin_headers(nghttp2_session*, const nghttp2_frame* frame, void* p) {
  static_cast<h2_client*>(p)->responses_[frame->hd.stream_id].header_blocks++;
  return 0;
}

int h2_client::on_header(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name,
                         std::size_t namelen, const std::uint8_t* value, std::size_t valuelen, std::uint8_t,
                         void* p) {
  auto& r = static_cast<h2_client*>(p)->responses_[frame->hd.stream_id];
  auto& target = r.header_blocks > 1 ? r.trailers : r.headers;
  target[std::string(reinterpret_cast<const char*>(name), namelen)] =
      std::string(reinterpret_cast<const char*>(value), valuelen);
  return 0;
}

int h2_client::on_data(nghttp2_session*, std::uint8_t, std::int32_t id, const std::uint8_t* data,
                       std::size_t len, void* p) {
  static_cast<h2_client*>(p)->responses_[id].body.append(reinterpret_cast<const char*>(data), len);
  return 0;
}

int h2_client::on_close(nghttp2_session*, std::int32_t id, std::uint32_t error_code, void* p) {
  auto& r = static_cast<h2_client*>(p)->responses_[id];
  r.closed = true;
  r.error_code = error_code;
  return 0;
}

}  // namespace sluice::test

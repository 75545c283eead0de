#include "net/h2/session.hpp"

#include <algorithm>
#include <cstring>
#include <new>

namespace sluice::net::h2 {

namespace {

nghttp2_nv make_nv(std::string_view name, std::string_view value) {
  // nghttp2 takes non-const pointers but only reads them. Names are lowercase literals (see h2::header): sent
  // without a copy or a lowercasing pass. Values may be temporaries: copied.
  return {reinterpret_cast<std::uint8_t*>(const_cast<char*>(name.data())),
          reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data())), name.size(), value.size(),
          NGHTTP2_NV_FLAG_NO_COPY_NAME};
}

constexpr std::size_t max_headers = 16;

}  // namespace

// nghttp2's callbacks, each finding the session through user_data.
struct session::callbacks {
  static session& self(void* p) { return *static_cast<session*>(p); }

  static int on_begin_headers(nghttp2_session* ng, const nghttp2_frame* frame, void* p) {
    auto& s = self(p);
    s.header_bytes_ = 0;  // each block (request headers or trailers) counts on its own
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    auto st = s.factory_.open_stream(s);
    if (!st) {
      nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, frame->hd.stream_id, NGHTTP2_REFUSED_STREAM);
      return 0;
    }
    stream* raw = st.get();
    raw->session_ = &s;
    raw->id_ = frame->hd.stream_id;
    raw->self_ = std::move(st);
    raw->next_ = s.open_;
    if (s.open_ != nullptr) s.open_->prev_ = raw;
    s.open_ = raw;
    s.last_ = raw;
    nghttp2_session_set_stream_user_data(ng, frame->hd.stream_id, raw);
    return 0;
  }

  static int on_header(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name,
                       std::size_t namelen, const std::uint8_t* value, std::size_t valuelen, std::uint8_t,
                       void* p) {
    auto& s = self(p);
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    auto* st = s.find(frame->hd.stream_id);
    if (st == nullptr) return 0;  // trailers of a stream we refused, or headers we ignore
    // HPACK's accounting: each field counts its name, value and 32 bytes.
    s.header_bytes_ += namelen + valuelen + 32;
    if (s.header_bytes_ > s.max_header_bytes_) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    if (frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;  // request trailers carry nothing we use
    bool ok = st->on_header({reinterpret_cast<const char*>(name), namelen},
                            {reinterpret_cast<const char*>(value), valuelen});
    return ok ? 0 : NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }

  static int on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* p) {
    auto& s = self(p);
    s.preface_received_ = true;  // nghttp2 passes no frame on before the client's magic and SETTINGS
    auto* st = s.find(frame->hd.stream_id);
    if (st == nullptr) return 0;
    // Held: a callback may close (and free) the stream.
    auto hold = st->self_;
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
      st->on_headers_done();
    }
    if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0 && st->open()) {
      st->request_ended_ = true;
      s.release_held(*st);
      st->on_request_end();
    }
    return 0;
  }

  static int on_data_chunk(nghttp2_session* ng, std::uint8_t, std::int32_t id, const std::uint8_t* data,
                           std::size_t len, void* p) {
    // The stream's window is given back at once (one request may be larger than it); the connection's only
    // when the request is complete, so a client cannot make the calls it leaves unfinished hold more than the
    // connection window.
    nghttp2_session_consume_stream(ng, id, len);
    auto* st = self(p).find(id);
    if (st == nullptr) {
      nghttp2_session_consume_connection(ng, len);
      return 0;
    }
    st->held_bytes_ += len;
    const bool ok = st->on_data({data, len});
    if (!st->keeps_body()) self(p).release_held(*st);
    return ok ? 0 : NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }

  // RFC 9113 §8.1: a server that answered before the request ended asks the client to stop sending with
  // RST_STREAM NO_ERROR once the answer's last frame is out (queued earlier, nghttp2 would drop the answer).
  // Without it a client that never half-closes (a bidirectional stream refused at once) holds the stream.
  static int on_frame_send(nghttp2_session* ng, const nghttp2_frame* frame, void* p) {
    if ((frame->hd.flags & NGHTTP2_FLAG_END_STREAM) == 0 ||
        (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA))
      return 0;
    auto* st = self(p).find(frame->hd.stream_id);
    if (st != nullptr && !st->request_ended_)
      nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, frame->hd.stream_id, NGHTTP2_NO_ERROR);
    return 0;
  }

  static int on_stream_close(nghttp2_session*, std::int32_t id, std::uint32_t error_code, void* p) {
    self(p).close_stream(id, error_code);
    return 0;
  }

  // The response body, taken from the stream's buffer; trailers go out when it is empty and finished.
  static ssize_t read_body(nghttp2_session* ng, std::int32_t, std::uint8_t* buf, std::size_t length,
                           std::uint32_t* flags, nghttp2_data_source* source, void*) {
    auto* st = static_cast<stream*>(source->ptr);  // nghttp2 asks only while the stream is open
    const std::size_t left = st->out_.size() - st->out_taken_;
    const std::size_t n = std::min(left, length);
    if (n > 0)
      std::memcpy(buf, st->out_.data() + st->out_taken_, n);  // an emptied buffer may hold no storage
    st->out_taken_ += n;
    if (st->out_taken_ == st->out_.size()) {
      st->out_.clear();
      // A long-lived stream (a quota stream) keeps no large buffer between its answers.
      if (st->out_.capacity() > 4096) st->out_.shrink_to_fit();
      st->out_taken_ = 0;
    }
    if (n == left && st->ended_) {
      *flags |= NGHTTP2_DATA_FLAG_EOF;
      if (st->trailer_count_ > 0) {
        *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
        nghttp2_nv nva[stream::max_trailers];
        for (std::size_t i = 0; i < st->trailer_count_; ++i)
          nva[i] = make_nv(st->trailers_[i].first, st->trailers_[i].second);
        if (nghttp2_submit_trailer(ng, st->id_, nva, st->trailer_count_) != 0)
          return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
      }
      st->body_open_ = false;
      return static_cast<ssize_t>(n);
    }
    if (n == 0) {
      st->deferred_ = true;
      return NGHTTP2_ERR_DEFERRED;
    }
    return static_cast<ssize_t>(n);
  }
};

session::session(stream_factory& factory, const limits& l)
    : factory_(factory), max_header_bytes_(l.max_header_list_bytes) {
  nghttp2_session_callbacks* cbs = nullptr;
  if (nghttp2_session_callbacks_new(&cbs) != 0) throw std::bad_alloc();
  nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, callbacks::on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cbs, callbacks::on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, callbacks::on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, callbacks::on_data_chunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, callbacks::on_stream_close);
  nghttp2_session_callbacks_set_on_frame_send_callback(cbs, callbacks::on_frame_send);
  nghttp2_option* opt = nullptr;
  if (nghttp2_option_new(&opt) != 0) {
    nghttp2_session_callbacks_del(cbs);
    throw std::bad_alloc();
  }
  nghttp2_option_set_stream_reset_rate_limit(opt, l.reset_burst, l.reset_rate_per_second);
  nghttp2_option_set_max_continuations(opt, l.max_continuations);
  nghttp2_option_set_max_send_header_block_length(opt, 64 * 1024);
  // No RFC 7540 priority tree: gRPC clients do not use it, and keeping closed streams for it costs time and
  // memory on every stream.
  nghttp2_option_set_no_closed_streams(opt, 1);
  // nghttp2's HTTP semantics checks validate every header of every request (a tenth of a call's cost); a gRPC
  // call reads only :method, :path and four gRPC headers, and checks those itself.
  nghttp2_option_set_no_http_messaging(opt, 1);
  nghttp2_option_set_no_auto_window_update(opt, 1);  // see on_data_chunk
  int rv = nghttp2_session_server_new3(&ng_, cbs, this, opt, memory_.mem());
  memory_.seal();
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cbs);
  if (rv != 0) throw std::bad_alloc();

  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, l.max_concurrent_streams},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, l.initial_window_size},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, static_cast<std::uint32_t>(l.max_header_list_bytes)},
      {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
  };
  nghttp2_submit_settings(ng_, NGHTTP2_FLAG_NONE, settings, std::size(settings));
  // The connection window: large, so many streams' requests are never held up by it.
  nghttp2_session_set_local_window_size(ng_, NGHTTP2_FLAG_NONE, 0,
                                        static_cast<std::int32_t>(l.connection_window));
}

session::~session() {
  // nghttp2_session_del calls no close callback: tell the streams still open ourselves.
  while (open_ != nullptr) close_stream(open_->id_, NGHTTP2_CANCEL);
  nghttp2_session_del(ng_);
}

bool session::feed(std::span<const std::uint8_t> bytes) {
  if (broken_) return false;
  in_feed_ = true;
  ssize_t rv = nghttp2_session_mem_recv(ng_, bytes.data(), bytes.size());
  in_feed_ = false;
  if (rv < 0) {
    broken_ = true;
    // What nghttp2 has already queued (a GOAWAY naming the error) still goes out.
    if (rv != NGHTTP2_ERR_BAD_CLIENT_MAGIC) nghttp2_session_terminate_session(ng_, NGHTTP2_PROTOCOL_ERROR);
    return false;
  }
  return true;
}

bool session::drain(std::string& out) {
  for (;;) {
    const std::uint8_t* data = nullptr;
    ssize_t n = nghttp2_session_mem_send(ng_, &data);
    if (n < 0) {
      broken_ = true;
      return false;
    }
    if (n == 0) return true;
    out.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
  }
}

bool session::finished() const {
  return broken_ ? nghttp2_session_want_write(ng_) == 0
                 : nghttp2_session_want_read(ng_) == 0 && nghttp2_session_want_write(ng_) == 0;
}

void session::shutdown_notice() {
  nghttp2_submit_shutdown_notice(ng_);
  queued();
}

void session::goaway() {
  nghttp2_submit_goaway(ng_, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(ng_),
                        NGHTTP2_NO_ERROR, nullptr, 0);
  queued();
  // Held first: a stream that ends itself here may leave the list.
  std::vector<std::shared_ptr<stream>> open;
  for (stream* st = open_; st != nullptr; st = st->next_) open.push_back(st->self_);
  for (auto& st : open) {
    if (st->open()) st->on_going_away();
  }
}

void session::queued() {
  if (!in_feed_) factory_.output_ready();
}

stream* session::find(std::int32_t id) {
  if (last_ != nullptr && last_->id_ == id) return last_;
  auto* st = static_cast<stream*>(nghttp2_session_get_stream_user_data(ng_, id));
  if (st != nullptr) last_ = st;
  return st;
}

void session::close_stream(std::int32_t id, std::uint32_t error_code) {
  stream* raw = find(id);
  if (raw == nullptr) return;
  if (last_ == raw) last_ = nullptr;
  (raw->prev_ != nullptr ? raw->prev_->next_ : open_) = raw->next_;
  if (raw->next_ != nullptr) raw->next_->prev_ = raw->prev_;
  raw->prev_ = raw->next_ = nullptr;
  auto st = std::move(raw->self_);
  release_held(*st);
  nghttp2_session_set_stream_user_data(ng_, id, nullptr);
  st->session_ = nullptr;
  st->on_closed(error_code);
}

void session::release_held(stream& s) {
  if (s.held_bytes_ == 0) return;
  nghttp2_session_consume_connection(ng_, s.held_bytes_);
  s.held_bytes_ = 0;
}

void session::resume(stream& s) {
  if (s.deferred_) {
    s.deferred_ = false;
    nghttp2_session_resume_data(ng_, s.id_);
  }
  queued();
}

void session::submit_response(stream& s, std::span<const header> headers, bool end_stream) {
  nghttp2_nv nva[max_headers];
  std::size_t count = std::min(headers.size(), max_headers);
  for (std::size_t i = 0; i < count; ++i) nva[i] = make_nv(headers[i].name, headers[i].value);
  nghttp2_data_provider body{};
  body.source.ptr = &s;
  body.read_callback = callbacks::read_body;
  s.body_open_ = !end_stream;
  if (nghttp2_submit_response(ng_, s.id_, nva, count, end_stream ? nullptr : &body) != 0) {
    nghttp2_submit_rst_stream(ng_, NGHTTP2_FLAG_NONE, s.id_, NGHTTP2_INTERNAL_ERROR);
  }
  queued();
}

void stream::respond(std::span<const header> headers, bool end_stream) {
  if (session_ != nullptr) session_->submit_response(*this, headers, end_stream);
}

char* stream::reserve(std::size_t n) {
  const std::size_t at = out_.size();
  out_.resize(at + n, boost::container::default_init);
  if (session_ != nullptr && body_open_ && !ended_) session_->resume(*this);
  return out_.data() + at;
}

void stream::reset(std::uint32_t error_code) {
  if (session_ == nullptr) return;
  // What was queued will never be sent: freed now, not when the peer finally reads (it may never).
  out_.clear();
  out_.shrink_to_fit();
  out_taken_ = 0;
  nghttp2_submit_rst_stream(session_->ng_, NGHTTP2_FLAG_NONE, id_, error_code);
  session_->queued();
}

void stream::finish(std::span<const header> trailers) {
  if (session_ == nullptr || !body_open_ || ended_) return;
  for (const auto& t : trailers) {
    if (trailer_count_ == max_trailers) break;
    trailers_[trailer_count_].first = t.name;
    trailers_[trailer_count_++].second = t.value;
  }
  ended_ = true;
  session_->resume(*this);
}

}  // namespace sluice::net::h2

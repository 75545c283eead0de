#pragma once
// A gRPC callback-API message allocator that puts each call's request and response on one protobuf arena
// whose first block lives inside the holder: a call's messages, strings and repeated fields cost one
// allocation instead of one per field.

#include <google/protobuf/arena.h>
#include <grpcpp/support/message_allocator.h>

#include <cstddef>

namespace sluice::net::grpc {

template <typename Request, typename Response, std::size_t InitialBlockBytes = 2048>
class arena_allocator final : public ::grpc::MessageAllocator<Request, Response> {
 public:
  ::grpc::MessageHolder<Request, Response>* AllocateMessages() override { return new holder(); }

 private:
  class holder final : public ::grpc::MessageHolder<Request, Response> {
   public:
    holder() : arena_(options(block_)) {
      this->set_request(google::protobuf::Arena::CreateMessage<Request>(&arena_));
      this->set_response(google::protobuf::Arena::CreateMessage<Response>(&arena_));
    }
    void Release() override { delete this; }

   private:
    static google::protobuf::ArenaOptions options(char* block) {
      google::protobuf::ArenaOptions o;
      o.initial_block = block;
      o.initial_block_size = InitialBlockBytes;
      return o;
    }

    alignas(std::max_align_t) char block_[InitialBlockBytes];  // before arena_: it must exist first
    google::protobuf::Arena arena_;
  };
};

}  // namespace sluice::net::grpc

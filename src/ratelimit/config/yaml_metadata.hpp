#pragma once
// A rule's `metadata` (any YAML mapping) as the google.protobuf.Struct that goes into a response's
// dynamic_metadata: maps, lists, strings, numbers (integers and finite floats), booleans and nulls.

#include <memory>
#include <stdexcept>

#include <google/protobuf/struct.pb.h>

namespace YAML {
class Node;
}

namespace sluice::ratelimit::config {

// Throws std::invalid_argument naming the offending value: a non-mapping, a key that is not a string, or a
// number that is infinite, NaN or out of range.
std::shared_ptr<const google::protobuf::Struct> metadata_from_yaml(const YAML::Node& node);

}  // namespace sluice::ratelimit::config

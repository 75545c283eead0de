// Force-included into every file of the TSan build (scripts/sanitize tsan).
//
// Debian's libprotobuf is built without TSan, but map_field.h declares two more members when
// __SANITIZE_THREAD__ is defined: TSan-built code would then see another layout of every map field than the
// library's own code (google.protobuf.Struct's map crashed on its first insert). It is included here once
// with the macro hidden, so every file sees the library's layout; libstdc++'s configuration is read first,
// with the macro, so its own TSan support stays on.
#include <cstddef>

#pragma push_macro("__SANITIZE_THREAD__")
#undef __SANITIZE_THREAD__
#include <google/protobuf/map_field.h>
#pragma pop_macro("__SANITIZE_THREAD__")

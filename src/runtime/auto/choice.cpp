#include "runtime/auto/choice.hpp"

namespace stragglar::detail {

std::string to_string(const Choice& c) {
  std::string s = stragglar::to_string(c.algorithm);
  if (c.straggler >= 0) s += "(straggler " + std::to_string(c.straggler) + ")";
  if (!c.late.empty()) {
    s += "(late ";
    for (std::size_t i = 0; i < c.late.size(); ++i) {
      if (i) s += ',';
      s += std::to_string(c.late[i]);
    }
    s += ')';
  }
  return s;
}

}  // namespace stragglar::detail

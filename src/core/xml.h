// Text for XML/SVG: the five characters that markup gives a meaning escaped as entities.
#pragma once

#include <string>

namespace qd {

std::string xml_escape(const std::string& s);

}  // namespace qd

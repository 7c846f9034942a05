// JSON output: the one quoting of text as a JSON string, for the files and pages
// tessera writes (flight records, the health snapshot).
#ifndef TESSERA_BASE_JSON_H_
#define TESSERA_BASE_JSON_H_

#include <cstdio>
#include <string>

namespace tessera {

// `text` as a JSON string literal: quotes and backslashes escaped, control characters
// as \u00XX; other bytes as they are (UTF-8 passes through).
inline std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace tessera

#endif  // TESSERA_BASE_JSON_H_

#include "chunking.hpp"

#include "utf8.hpp"

namespace k3::tiktoken {

namespace {

// tokenization_kimi.py _split_whitespaces_or_nonwhitespaces, over code points: a run that
// would grow past `max_run` is cut before the code point that overflows it.
void split_runs(std::string_view s, std::size_t max_run, std::vector<std::string_view>& out) {
  if (s.empty()) return;
  if (max_run == 0) {
    out.push_back(s);
    return;
  }
  std::size_t pos = 0;
  std::size_t probe = 0;
  bool run_is_space = python_isspace(next_code_point(s, probe));
  std::size_t run_len = 0;
  std::size_t slice_start = 0;
  while (pos < s.size()) {
    const std::size_t here = pos;
    const bool is_space = python_isspace(next_code_point(s, pos));
    if (is_space != run_is_space) {
      run_len = 1;
      run_is_space = is_space;
    } else if (++run_len > max_run) {
      out.push_back(s.substr(slice_start, here - slice_start));
      slice_start = here;
      run_len = 1;
    }
  }
  out.push_back(s.substr(slice_start));
}

}  // namespace

void split_for_encoding(std::string_view text, const ChunkLimits& limits, std::vector<std::string_view>& out) {
  if (limits.max_chunk_chars == 0) {
    split_runs(text, limits.max_run_chars, out);
    return;
  }
  std::size_t chunk_start = 0;
  std::size_t pos = 0;
  std::size_t chars = 0;
  while (pos < text.size()) {
    next_code_point(text, pos);
    if (++chars == limits.max_chunk_chars) {
      split_runs(text.substr(chunk_start, pos - chunk_start), limits.max_run_chars, out);
      chunk_start = pos;
      chars = 0;
    }
  }
  split_runs(text.substr(chunk_start), limits.max_run_chars, out);
}

}  // namespace k3::tiktoken

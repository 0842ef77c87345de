// RAII owners of libcurl handles (move-only; the deleter is the matching curl cleanup).
#pragma once
#include <memory>

#include <curl/curl.h>

namespace k3::storage::http {

struct EasyDeleter {
  void operator()(CURL* h) const noexcept { curl_easy_cleanup(h); }
};
struct MultiDeleter {
  void operator()(CURLM* h) const noexcept { curl_multi_cleanup(h); }
};
struct SlistDeleter {
  void operator()(curl_slist* l) const noexcept { curl_slist_free_all(l); }
};

using EasyHandle = std::unique_ptr<CURL, EasyDeleter>;
using MultiHandle = std::unique_ptr<CURLM, MultiDeleter>;
using HeaderList = std::unique_ptr<curl_slist, SlistDeleter>;

/// Appends one header line; false when libcurl cannot allocate (the list is unchanged).
inline bool append_header(HeaderList& list, const char* line) noexcept {
  curl_slist* grown = curl_slist_append(list.get(), line);
  if (grown == nullptr) return false;
  (void)list.release();  // curl_slist_append returns the same head once the list exists
  list.reset(grown);
  return true;
}

}  // namespace k3::storage::http

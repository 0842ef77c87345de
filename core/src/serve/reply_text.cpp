// A reply token by token (reply_text.hpp): the chat parser or raw text, and stop strings.
#include "serve/reply_text.hpp"

#include <algorithm>
#include <string_view>

#include <k3/error.hpp>
#include <k3/log.hpp>

#include "util/utf8.hpp"

namespace k3::serve {

ChatOutput::Delta ChatOutput::push(std::uint32_t id) {
  Delta d;
  if (!raw_) {
    try {
      for (auto& ev : parser_.feed(id)) {
        switch (ev.kind) {
          case chat::StreamEvent::Kind::think_text: d.reasoning += ev.text; break;
          case chat::StreamEvent::Kind::response_text: d.content += stop_.push(ev.text); break;
          case chat::StreamEvent::Kind::tool_call: d.calls.push_back(std::move(ev.call)); break;
          case chat::StreamEvent::Kind::done: break;
        }
      }
    } catch (const Error& e) {
      raw_ = true;
      log(LogLevel::debug, "serve", std::string("the reply left the K3 format, sending the rest as text: ") + e.what());
    }
    if (!raw_) return finish_delta(d);
  }
  if (engine_.chat_tokens().is_stop(id)) return finish_delta(d);
  raw_ids_.push_back(id);
  const std::string text = engine_.chat_tokens().decode(raw_ids_);
  const std::size_t complete = util::whole_utf8_prefix(text);  // an unfinished character waits
  if (complete > raw_printed_) {
    d.content += stop_.push(std::string_view(text).substr(raw_printed_, complete - raw_printed_));
    raw_printed_ = complete;
  }
  return finish_delta(d);
}

ChatOutput::Delta ChatOutput::flush() {
  Delta d;
  if (raw_) {
    const std::string text = engine_.chat_tokens().decode(raw_ids_);
    if (text.size() > raw_printed_) d.content += stop_.push(std::string_view(text).substr(raw_printed_));
    raw_printed_ = text.size();
  }
  d.content += stop_.flush();
  return finish_delta(d);
}

ChatOutput::Delta ChatOutput::finish_delta(Delta& d) {
  reasoning += d.reasoning;
  content += d.content;
  calls.insert(calls.end(), d.calls.begin(), d.calls.end());
  return std::move(d);
}

std::string TextOutput::push(std::uint32_t id) {
  if (id == eos_) return {};
  std::string s = stop_.push(text_.push(id));
  all += s;
  return s;
}

std::string TextOutput::flush() {
  std::string s = stop_.push(text_.flush());
  s += stop_.flush();
  all += s;
  return s;
}

}  // namespace k3::serve

// k3host plugin SDK: a plugin's parameters — the table that describes them
// (k3::sdk::ParamDescriptor, abi.hpp) and the reader that checks and reads them through it.
// \since ABI 3
//
// One table serves three readers, so type, range, default and meaning are written once:
// the host prints it (`k3host plugins --params`), checks a pipeline's parameters against it
// before the factory runs (an error then points at the parameter's file:line:col), and the
// factory reads its parameters through ParamReader with it:
//
//   constexpr k3::sdk::ParamDescriptor kParams[] = {
//       k3::sdk::param::integer("queue_depth", "32", "[1, 4096]", "ring entries per read() call"),
//       k3::sdk::param::boolean("direct", "false", "open files with O_DIRECT"),
//   };
//   Status create(const CreateArgs& args, std::unique_ptr<StorageBackend>& out,
//                 std::vector<std::string>& unknown_params) {
//     ParamReader params(args.params, kParams);  // every value checked against the table
//     unknown_params = params.unused();          // undescribed keys: the host refuses them
//     if (!params.ok()) return params.status();  // "queue_depth: 0 is out of range 1–4096 (ring ...)"
//     const int depth = params.get_int<int>("queue_depth");  // the value, or the table's default
//     ...
//   }
//   K3_PLUGIN_PARAMS(kParams)                    // plugin.hpp: exports the same table
//
// Text each type accepts: integer [+-]digits within the interval; number a finite decimal
// (3, 0.5, 1e-3) within the interval; bool true/false, yes/no, on/off, 1/0; enum exactly
// one of the '|'-separated choices (a choice "p*" accepts any text that starts with "p");
// string and path anything. Intervals are "[lo, hi]", "(" or ")" marking an open end and
// an empty side no bound ("[0, )" is >= 0); an integer's bounds are integers.
//
// Drift between the table and the code is a programming error, thrown as std::logic_error
// (the factory wrapper turns it into StatusCode::internal, so it fails every creation and
// no test can miss it): reading a key the table does not describe or as another type, an
// integer type too narrow for the key's interval, or a fallback for a key whose default the
// table gives. A described key the factory never reads stays in unused(), so the host
// refuses it: a test that sets every described key catches that direction.
#pragma once
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

#include <k3/abi.hpp>
#include <k3/status.hpp>

namespace k3::sdk {

/// One parameter as the host hands it over: the pipeline's key and its text.
struct Param {
  std::string_view key;
  std::string_view value;
};

/// Table entries, one function per type (the struct stays plain C data).
namespace param {
constexpr ParamDescriptor string(const char* key, const char* default_value, const char* meaning) {
  return {key, K3_PARAM_STRING, default_value, nullptr, meaning, 0};
}
constexpr ParamDescriptor path(const char* key, const char* default_value, const char* meaning) {
  return {key, K3_PARAM_PATH, default_value, nullptr, meaning, 0};
}
constexpr ParamDescriptor integer(const char* key, const char* default_value, const char* interval,
                                  const char* meaning) {
  return {key, K3_PARAM_INTEGER, default_value, interval, meaning, 0};
}
constexpr ParamDescriptor number(const char* key, const char* default_value, const char* interval,
                                 const char* meaning) {
  return {key, K3_PARAM_NUMBER, default_value, interval, meaning, 0};
}
constexpr ParamDescriptor boolean(const char* key, const char* default_value, const char* meaning) {
  return {key, K3_PARAM_BOOL, default_value, nullptr, meaning, 0};
}
constexpr ParamDescriptor choice(const char* key, const char* default_value, const char* choices, const char* meaning) {
  return {key, K3_PARAM_ENUM, default_value, choices, meaning, 0};
}
/// "inner.*": every key under the prefix, passed on elsewhere (read with ParamReader::forwarded).
constexpr ParamDescriptor family(const char* key_star, const char* meaning) {
  return {key_star, K3_PARAM_STRING, nullptr, nullptr, meaning, 0};
}
/// A decorator's "inner.*": the parameters of the storage plugin that "inner" names.
constexpr ParamDescriptor storage_params(const char* key_star, const char* meaning) {
  return {key_star, K3_PARAM_STRING, nullptr, nullptr, meaning, K3_PARAM_STORAGE_PARAMS};
}
constexpr ParamDescriptor required(ParamDescriptor d) {
  d.flags |= K3_PARAM_REQUIRED;
  return d;
}
}  // namespace param

namespace detail {

inline std::string_view text_of(const char* s) noexcept {
  return s != nullptr ? std::string_view(s) : std::string_view();
}

inline std::string_view trimmed(std::string_view s) noexcept {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

/// An integer as written: sign and magnitude, so every int64 and uint64 value is exact.
struct Integer {
  bool negative = false;
  std::uint64_t magnitude = 0;
};

inline bool parse_integer(std::string_view text, Integer& out) noexcept {
  Integer v;
  if (!text.empty() && (text.front() == '+' || text.front() == '-')) {
    v.negative = text.front() == '-';
    text.remove_prefix(1);
  }
  if (text.empty() || text.front() < '0' || text.front() > '9') return false;
  const auto res = std::from_chars(text.data(), text.data() + text.size(), v.magnitude);
  if (res.ec != std::errc{} || res.ptr != text.data() + text.size()) return false;
  if (v.magnitude == 0) v.negative = false;
  out = v;
  return true;
}

/// <0, 0, >0 as a is below, equal to, above b.
inline int compare(const Integer& a, const Integer& b) noexcept {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  if (a.magnitude == b.magnitude) return 0;
  const bool below = a.magnitude < b.magnitude;
  return (below != a.negative) ? -1 : 1;
}

inline bool parse_number(std::string_view text, double& out) noexcept {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty() || text.front() == '+') return false;
  double d = 0;
  const auto res = std::from_chars(text.data(), text.data() + text.size(), d);
  if (res.ec != std::errc{} || res.ptr != text.data() + text.size() || !std::isfinite(d)) return false;
  out = d;
  return true;
}

/// "[lo, hi]" with ( ) for open ends and an empty side for no bound.
struct Interval {
  std::string_view lo, hi;  ///< empty: no bound on that side
  bool lo_open = false, hi_open = false;
};

inline bool parse_interval(std::string_view text, Interval& out) noexcept {
  text = trimmed(text);
  if (text.size() < 3 || (text.front() != '[' && text.front() != '(') || (text.back() != ']' && text.back() != ')'))
    return false;
  const std::string_view inside = text.substr(1, text.size() - 2);
  const auto comma = inside.find(',');
  if (comma == std::string_view::npos || inside.find(',', comma + 1) != std::string_view::npos) return false;
  out.lo = trimmed(inside.substr(0, comma));
  out.hi = trimmed(inside.substr(comma + 1));
  out.lo_open = text.front() == '(';
  out.hi_open = text.back() == ')';
  return true;
}

inline bool is_family(const ParamDescriptor& d) noexcept {
  const std::string_view k = text_of(d.key);
  return k.size() >= 2 && k.substr(k.size() - 2) == ".*";
}

/// True when `key` is `d`'s key, or lies under `d`'s family prefix ("inner.*" takes "inner.x").
inline bool describes(const ParamDescriptor& d, std::string_view key) noexcept {
  const std::string_view k = text_of(d.key);
  if (!is_family(d)) return k == key;
  const std::string_view prefix = k.substr(0, k.size() - 1);  // "inner."
  return key.size() > prefix.size() && key.substr(0, prefix.size()) == prefix;
}

inline bool is_interval_type(std::uint32_t type) noexcept {
  return type == K3_PARAM_INTEGER || type == K3_PARAM_NUMBER;
}

/// True when `value` is one of the '|'-separated `choices` ("p*" matches by prefix).
inline bool is_choice(std::string_view choices, std::string_view value) noexcept {
  while (true) {
    const auto bar = choices.find('|');
    const std::string_view c = choices.substr(0, bar);
    const bool prefix = !c.empty() && c.back() == '*';
    if (prefix ? value.size() >= c.size() && value.substr(0, c.size() - 1) == c.substr(0, c.size() - 1) : value == c)
      return true;
    if (bar == std::string_view::npos) return false;
    choices.remove_prefix(bar + 1);
  }
}

}  // namespace detail

/// "string", "integer", "number", "bool", "enum", "path"; "?" for a type this SDK lacks.
inline const char* param_type_name(std::uint32_t type) noexcept {
  switch (type) {
    case K3_PARAM_STRING: return "string";
    case K3_PARAM_INTEGER: return "integer";
    case K3_PARAM_NUMBER: return "number";
    case K3_PARAM_BOOL: return "bool";
    case K3_PARAM_ENUM: return "enum";
    case K3_PARAM_PATH: return "path";
    default: return "?";
  }
}

/// What `d` allows, for people: "1–4096", "(0, 1]", ">= 0", "none, buffered"; "" when any
/// text of its type goes.
inline std::string allowed_text(const ParamDescriptor& d) {
  const std::string_view allowed = detail::text_of(d.allowed);
  if (d.type == K3_PARAM_ENUM) {
    std::string out;
    for (char c : allowed) out += c == '|' ? std::string(", ") : std::string(1, c);
    return out;
  }
  detail::Interval iv;
  if (!detail::is_interval_type(d.type) || !detail::parse_interval(allowed, iv)) return {};
  const std::string lo(iv.lo), hi(iv.hi);
  if (!lo.empty() && !hi.empty()) {
    if (!iv.lo_open && !iv.hi_open) return lo + "\u2013" + hi;
    return std::string(iv.lo_open ? "(" : "[") + lo + ", " + hi + (iv.hi_open ? ")" : "]");
  }
  if (!lo.empty()) return (iv.lo_open ? "> " : ">= ") + lo;
  if (!hi.empty()) return (iv.hi_open ? "< " : "<= ") + hi;
  return {};
}

/// Why `value` is not acceptable for `d` ("0 is out of range 1–4096", "expected an integer,
/// got 'x'"), or "" when it is. A family entry accepts anything: its keys are described elsewhere.
inline std::string value_problem(const ParamDescriptor& d, std::string_view value) {
  const std::string shown(value);
  const std::string_view allowed = detail::text_of(d.allowed);
  switch (d.type) {
    case K3_PARAM_STRING:
    case K3_PARAM_PATH: return {};
    case K3_PARAM_BOOL:
      if (value == "true" || value == "false" || value == "yes" || value == "no" || value == "on" || value == "off" ||
          value == "1" || value == "0")
        return {};
      return "expected true or false, got '" + shown + "'";
    case K3_PARAM_ENUM:
      if (detail::is_choice(allowed, value)) return {};
      return "'" + shown + "' is not one of " + allowed_text(d);
    case K3_PARAM_INTEGER: {
      detail::Integer v, bound;
      if (!detail::parse_integer(value, v)) return "expected an integer, got '" + shown + "'";
      detail::Interval iv;
      if (!detail::parse_interval(allowed, iv)) return {};
      const bool below = !iv.lo.empty() && detail::parse_integer(iv.lo, bound) &&
                         (detail::compare(v, bound) < 0 || (iv.lo_open && detail::compare(v, bound) == 0));
      const bool above = !iv.hi.empty() && detail::parse_integer(iv.hi, bound) &&
                         (detail::compare(v, bound) > 0 || (iv.hi_open && detail::compare(v, bound) == 0));
      return below || above ? shown + " is out of range " + allowed_text(d) : std::string();
    }
    case K3_PARAM_NUMBER: {
      double v = 0, bound = 0;
      if (!detail::parse_number(value, v)) return "expected a number, got '" + shown + "'";
      detail::Interval iv;
      if (!detail::parse_interval(allowed, iv)) return {};
      const bool below = !iv.lo.empty() && detail::parse_number(iv.lo, bound) &&
                         (v < bound || (iv.lo_open && v == bound));
      const bool above = !iv.hi.empty() && detail::parse_number(iv.hi, bound) &&
                         (v > bound || (iv.hi_open && v == bound));
      return below || above ? shown + " is out of range " + allowed_text(d) : std::string();
    }
    default: return "has an unknown type " + std::to_string(d.type);
  }
}

/// "queue_depth: 0 is out of range 1–4096 (ring entries per read() call)": a problem with
/// one parameter, quoting its description.
inline std::string quoted_problem(const ParamDescriptor& d, std::string_view problem) {
  return std::string(detail::text_of(d.key)) + ": " + std::string(problem) + " (" +
         std::string(detail::text_of(d.meaning)) + ")";
}

/// The entry that describes `key` (its own, or a family's), or nullptr.
inline const ParamDescriptor* find_param(std::span<const ParamDescriptor> table, std::string_view key) noexcept {
  for (const auto& d : table)
    if (!detail::is_family(d) && detail::text_of(d.key) == key) return &d;
  for (const auto& d : table)
    if (detail::is_family(d) && detail::describes(d, key)) return &d;
  return nullptr;
}

/// Why `table` is not a well-formed description ("queue_depth: the default '0' is out of range
/// 1–4096"), or "" when it is: keys present and unique, known types, a meaning for each,
/// intervals and choices that parse, defaults the entry itself accepts. The host refuses a
/// library whose table is not well-formed.
inline std::string table_problem(std::span<const ParamDescriptor> table) {
  for (std::size_t i = 0; i < table.size(); ++i) {
    const ParamDescriptor& d = table[i];
    const std::string_view key = detail::text_of(d.key);
    const std::string where = key.empty() ? "entry " + std::to_string(i) : std::string(key);
    if (key.empty()) return where + ": no key";
    for (std::size_t j = 0; j < i; ++j)
      if (detail::text_of(table[j].key) == key) return where + ": described twice";
    if (std::string_view(param_type_name(d.type)) == "?") return where + ": unknown type " + std::to_string(d.type);
    if (detail::text_of(d.meaning).empty()) return where + ": no meaning";
    if ((d.flags & ~(K3_PARAM_REQUIRED | K3_PARAM_STORAGE_PARAMS)) != 0) return where + ": unknown flags";
    if (detail::is_family(d)) {
      if (d.type != K3_PARAM_STRING || d.default_value != nullptr || d.allowed != nullptr ||
          (d.flags & K3_PARAM_REQUIRED) != 0)
        return where + ": a family of keys has no type, default, range or requirement of its own";
      if ((d.flags & K3_PARAM_STORAGE_PARAMS) != 0) {
        const std::string_view name_key = key.substr(0, key.size() - 2);  // "inner" of "inner.*"
        const ParamDescriptor* named = nullptr;
        for (const auto& e : table)
          if (detail::text_of(e.key) == name_key) named = &e;
        if (named == nullptr || named->type != K3_PARAM_STRING)
          return where + ": forwards to the storage plugin named by '" + std::string(name_key) +
                 "', which the table does not describe as a string";
      }
      continue;
    }
    if ((d.flags & K3_PARAM_STORAGE_PARAMS) != 0) return where + ": only a family forwards to a storage plugin";
    const std::string_view allowed = detail::text_of(d.allowed);
    if (detail::is_interval_type(d.type) && d.allowed != nullptr) {
      detail::Interval iv;
      if (!detail::parse_interval(allowed, iv)) return where + ": malformed interval '" + std::string(allowed) + "'";
      detail::Integer i_bound;
      double d_bound = 0;
      for (const std::string_view b : {iv.lo, iv.hi})
        if (!b.empty() &&
            !(d.type == K3_PARAM_INTEGER ? detail::parse_integer(b, i_bound) : detail::parse_number(b, d_bound)))
          return where + ": bound '" + std::string(b) + "' is not " +
                 (d.type == K3_PARAM_INTEGER ? "an integer" : "a number");
    } else if (d.type == K3_PARAM_ENUM) {
      if (allowed.empty() || allowed.front() == '|' || allowed.back() == '|' ||
          allowed.find("||") != std::string_view::npos)
        return where + ": an enum needs its choices, '|'-separated";
    } else if (d.allowed != nullptr) {
      return where + ": only integers, numbers and enums have allowed values";
    }
    if ((d.flags & K3_PARAM_REQUIRED) != 0 && d.default_value != nullptr)
      return where + ": a required parameter has no default";
    if (d.default_value != nullptr)
      if (const std::string p = value_problem(d, d.default_value); !p.empty()) return where + ": the default " + p;
  }
  return {};
}

/// Checks a factory's parameters against its table once, at construction, then reads them.
/// Remembers which keys were read, so the factory can report the rest as unknown.
class ParamReader {
 public:
  ParamReader(std::span<const Param> params, std::span<const ParamDescriptor> table)
      : params_(params), table_(table), used_(params.size(), false) {
    for (const Param& p : params_) {
      const ParamDescriptor* d = find_param(table_, p.key);
      if (d == nullptr || detail::is_family(*d)) continue;  // unknown keys: unused() reports them
      if (const std::string problem = value_problem(*d, p.value); !problem.empty()) {
        status_ = Status::error(StatusCode::invalid_argument, quoted_problem(*d, problem));
        return;
      }
    }
    for (const ParamDescriptor& d : table_) {
      if ((d.flags & K3_PARAM_REQUIRED) == 0) continue;
      const long i = find(detail::text_of(d.key));
      if (i < 0 || params_[static_cast<std::size_t>(i)].value.empty()) {
        status_ = Status::error(StatusCode::invalid_argument, quoted_problem(d, "required"));
        return;
      }
    }
  }

  /// False when a described value has the wrong type or range, or a required one is missing.
  [[nodiscard]] bool ok() const noexcept { return status_.ok(); }
  /// invalid_argument "key: problem (meaning)" for the first bad parameter, else success.
  [[nodiscard]] const Status& status() const noexcept { return status_; }

  /// True when the key was given (whatever the table says).
  [[nodiscard]] bool has(std::string_view key) const noexcept { return find(key) >= 0; }

  /// A string, path or enum parameter: its value, else the table's default, else "".
  std::string get_string(std::string_view key) {
    const ParamDescriptor& d = spec(key, K3_PARAM_STRING, K3_PARAM_PATH, K3_PARAM_ENUM);
    if (const long i = mark(key); i >= 0) return std::string(params_[static_cast<std::size_t>(i)].value);
    return std::string(detail::text_of(d.default_value));
  }

  /// An integer parameter: its value, else the table's default (which must exist). `Int`
  /// must hold every value of the key's interval.
  template <class Int>
  Int get_int(std::string_view key) {
    const ParamDescriptor& d = integer_spec<Int>(key);
    if (const long i = mark(key); i >= 0) return to_int<Int>(params_[static_cast<std::size_t>(i)].value);
    if (d.default_value == nullptr) drift(key, "has no default in the table: read it with a fallback");
    return to_int<Int>(d.default_value);
  }
  /// An integer parameter without a default in the table: its value, else `fallback`
  /// (a default that depends on another parameter, or a "never" the interval cannot spell).
  template <class Int>
  Int get_int(std::string_view key, Int fallback) {
    const ParamDescriptor& d = integer_spec<Int>(key);
    if (d.default_value != nullptr) drift(key, "has a default in the table: read it without a fallback");
    if (const long i = mark(key); i >= 0) return to_int<Int>(params_[static_cast<std::size_t>(i)].value);
    return fallback;
  }

  /// A number parameter: its value, else the table's default (which must exist).
  double get_double(std::string_view key) {
    const ParamDescriptor& d = spec(key, K3_PARAM_NUMBER, K3_PARAM_NUMBER, K3_PARAM_NUMBER);
    const long i = mark(key);
    if (i < 0 && d.default_value == nullptr) drift(key, "has no default in the table");
    double v = 0;
    (void)detail::parse_number(i >= 0 ? params_[static_cast<std::size_t>(i)].value : detail::text_of(d.default_value),
                               v);
    return v;
  }

  /// A bool parameter: its value, else the table's default (which must exist).
  bool get_bool(std::string_view key) {
    const ParamDescriptor& d = spec(key, K3_PARAM_BOOL, K3_PARAM_BOOL, K3_PARAM_BOOL);
    const long i = mark(key);
    if (i < 0 && d.default_value == nullptr) drift(key, "has no default in the table");
    const std::string_view v = i >= 0 ? params_[static_cast<std::size_t>(i)].value : detail::text_of(d.default_value);
    return v == "true" || v == "yes" || v == "on" || v == "1";
  }

  /// The keys under a family ("inner." for the entry "inner.*"), with the prefix removed:
  /// for a decorator to hand its inner backend.
  std::vector<Param> forwarded(std::string_view prefix) {
    const std::string family = std::string(prefix) + "*";
    bool described = false;
    for (const auto& d : table_) described = described || (detail::is_family(d) && detail::text_of(d.key) == family);
    if (!described) drift(family, "is not a family the table describes");
    std::vector<Param> out;
    for (std::size_t i = 0; i < params_.size(); ++i)
      if (params_[i].key.size() > prefix.size() && params_[i].key.substr(0, prefix.size()) == prefix) {
        used_[i] = true;
        out.push_back({params_[i].key.substr(prefix.size()), params_[i].value});
      }
    return out;
  }

  /// invalid_argument "key: problem (meaning)": for a check the table cannot express (one
  /// parameter bounded by another, a file that must exist).
  [[nodiscard]] Status refuse(std::string_view key, std::string_view problem) const {
    const ParamDescriptor* d = find_param(table_, key);
    if (d == nullptr) drift(key, "is refused but not described");
    return Status::error(StatusCode::invalid_argument, quoted_problem(*d, problem));
  }

  /// Keys given but never read: the factory returns them as unknown.
  [[nodiscard]] std::vector<std::string> unused() const {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < params_.size(); ++i)
      if (!used_[i]) out.emplace_back(params_[i].key);
    return out;
  }

 private:
  [[noreturn]] static void drift(std::string_view key, std::string_view what) {
    throw std::logic_error("parameter '" + std::string(key) + "' " + std::string(what) +
                           " (the factory and its ParamDescriptor table disagree)");
  }

  const ParamDescriptor& spec(std::string_view key, std::uint32_t t1, std::uint32_t t2, std::uint32_t t3) const {
    const ParamDescriptor* d = find_param(table_, key);
    if (d == nullptr || detail::is_family(*d)) drift(key, "is read but not described");
    if (d->type != t1 && d->type != t2 && d->type != t3)
      drift(key, std::string("is described as ") + param_type_name(d->type) + " but read as another type");
    return *d;
  }

  template <class Int>
  const ParamDescriptor& integer_spec(std::string_view key) const {
    static_assert(std::is_integral_v<Int> && !std::is_same_v<Int, bool>, "get_int reads into an integer type");
    const ParamDescriptor& d = spec(key, K3_PARAM_INTEGER, K3_PARAM_INTEGER, K3_PARAM_INTEGER);
    // Every value the interval allows must fit `Int`; a side without a bound reaches the
    // limit of what the text can say (+-(2^64 - 1)).
    detail::Interval iv;
    (void)detail::parse_interval(detail::text_of(d.allowed), iv);
    detail::Integer lo{true, std::numeric_limits<std::uint64_t>::max()};
    detail::Integer hi{false, std::numeric_limits<std::uint64_t>::max()};
    if (!iv.lo.empty()) (void)detail::parse_integer(iv.lo, lo);
    if (!iv.hi.empty()) (void)detail::parse_integer(iv.hi, hi);
    if (!fits<Int>(lo) || !fits<Int>(hi)) drift(key, "has an interval wider than the integer type it is read into");
    return d;
  }

  template <class Int>
  static bool fits(const detail::Integer& v) noexcept {
    if (!v.negative) return v.magnitude <= static_cast<std::uint64_t>(std::numeric_limits<Int>::max());
    if constexpr (std::is_unsigned_v<Int>) {
      return false;
    } else {
      // |min| = max + 1, computed without overflowing Int.
      return v.magnitude <= static_cast<std::uint64_t>(std::numeric_limits<Int>::max()) + 1;
    }
  }

  template <class Int>
  static Int to_int(std::string_view text) {
    detail::Integer v;
    (void)detail::parse_integer(text, v);  // checked at construction (or by table_problem)
    if (!v.negative) return static_cast<Int>(v.magnitude);
    if constexpr (std::is_unsigned_v<Int>) {
      return 0;  // unreachable: integer_spec refused an unsigned type for negative values
    } else {
      return static_cast<Int>(-static_cast<std::int64_t>(v.magnitude - 1) - 1);
    }
  }

  long find(std::string_view key) const noexcept {
    for (std::size_t i = 0; i < params_.size(); ++i)
      if (params_[i].key == key) return static_cast<long>(i);
    return -1;
  }
  long mark(std::string_view key) {
    const long i = find(key);
    if (i >= 0) used_[static_cast<std::size_t>(i)] = true;
    return i;
  }

  std::span<const Param> params_;
  std::span<const ParamDescriptor> table_;
  std::vector<bool> used_;
  Status status_;
};

}  // namespace k3::sdk

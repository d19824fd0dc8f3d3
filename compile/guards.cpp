#include "compile/guards.h"

#include <charconv>
#include <sstream>

#include "hooks/runtime.h"

namespace hs::compile {

namespace {

void walk(const c10::IValue& v, const std::string& name, std::vector<GuardItem>& out) {
  GuardItem g;
  g.name = name;
  if (v.isTensor()) {
    const torch::Tensor& t = v.toTensor();
    if (!t.defined()) {
      g.kind = GuardItem::Kind::None;  // an undefined tensor is Python's None
    } else {
      g.kind = GuardItem::Kind::Tensor;
      g.sizes = t.sizes().vec();
      g.dtype = t.scalar_type();
      g.device = hooks::Runtime::current().devices().device_of(t);
      g.torch_device = t.device();
    }
    out.push_back(std::move(g));
  } else if (v.isTensorList()) {
    const auto ts = v.toTensorVector();
    g.kind = GuardItem::Kind::Other;
    g.s = "list";
    g.i = static_cast<int64_t>(ts.size());
    out.push_back(std::move(g));
    for (size_t i = 0; i < ts.size(); ++i) walk(c10::IValue(ts[i]), name + "[" + std::to_string(i) + "]", out);
  } else if (v.isList() || v.isTuple()) {
    const bool tuple = v.isTuple();
    std::vector<c10::IValue> elems;
    if (tuple)
      for (const auto& e : v.toTupleRef().elements()) elems.push_back(e);
    else
      for (const auto& e : v.toListRef()) elems.push_back(e);
    // The length first, so a shorter list fails on `len(...)` rather than on a missing leaf.
    g.kind = GuardItem::Kind::Other;
    g.s = tuple ? "tuple" : "list";
    g.i = static_cast<int64_t>(elems.size());
    out.push_back(std::move(g));
    for (size_t i = 0; i < elems.size(); ++i) walk(elems[i], name + "[" + std::to_string(i) + "]", out);
  } else if (v.isGenericDict()) {
    const auto dict = v.toGenericDict();
    g.kind = GuardItem::Kind::Other;
    g.s = "dict";
    g.i = static_cast<int64_t>(dict.size());
    out.push_back(std::move(g));
    for (const auto& kv : dict) {
      const std::string key = kv.key().isString() ? "'" + kv.key().toStringRef() + "'" : kv.key().tagKind();
      walk(kv.value(), name + "[" + key + "]", out);
    }
  } else if (v.isInt()) {
    g.kind = GuardItem::Kind::Int;
    g.i = v.toInt();
    out.push_back(std::move(g));
  } else if (v.isDouble()) {
    g.kind = GuardItem::Kind::Double;
    g.d = v.toDouble();
    out.push_back(std::move(g));
  } else if (v.isBool()) {
    g.kind = GuardItem::Kind::Bool;
    g.b = v.toBool();
    out.push_back(std::move(g));
  } else if (v.isString()) {
    g.kind = GuardItem::Kind::String;
    g.s = v.toStringRef();
    out.push_back(std::move(g));
  } else if (v.isNone()) {
    g.kind = GuardItem::Kind::None;
    out.push_back(std::move(g));
  } else if (v.isObject() || v.isCustomClass()) {
    g.kind = GuardItem::Kind::Object;
    g.s = v.type()->str();
    out.push_back(std::move(g));
  } else {
    g.kind = GuardItem::Kind::Other;
    g.s = v.tagKind();
    out.push_back(std::move(g));
  }
}

const char* kind_name(const GuardItem& g) {
  switch (g.kind) {
    case GuardItem::Kind::Tensor: return "Tensor";
    case GuardItem::Kind::Int: return "int";
    case GuardItem::Kind::Double: return "float";
    case GuardItem::Kind::Bool: return "bool";
    case GuardItem::Kind::String: return "str";
    case GuardItem::Kind::None: return "NoneType";
    case GuardItem::Kind::Object: return "object";
    case GuardItem::Kind::Other: return "other";
  }
  return "other";
}

std::string type_text(const GuardItem& g) {
  if (g.kind == GuardItem::Kind::Object || g.kind == GuardItem::Kind::Other) return g.s;
  return kind_name(g);
}

// Dynamo's TensorCheck::check_verbose order: device kind (its dispatch key set), dtype,
// device index, rank, sizes.
std::optional<std::string> tensor_failure(const GuardItem& want, const GuardItem& got) {
  std::ostringstream o;
  o << "tensor '" << want.name << "' ";
  if (want.device.kind != got.device.kind) {
    o << "device mismatch. expected " << want.device.str() << ", actual " << got.device.str();
    return o.str();
  }
  if (want.dtype != got.dtype) {
    o << "dtype mismatch. expected " << dtype_text(want.dtype) << ", actual " << dtype_text(got.dtype);
    return o.str();
  }
  if (want.device.index != got.device.index) {
    o << "Tensor device index mismatch. Expected device index to be " << want.device.index << ", actual "
      << got.device.index;
    return o.str();
  }
  if (want.sizes.size() != got.sizes.size()) {
    o << "rank mismatch. expected " << want.sizes.size() << ", actual " << got.sizes.size();
    return o.str();
  }
  for (size_t i = 0; i < want.sizes.size(); ++i)
    if (want.sizes[i] != got.sizes[i]) {
      o << "size mismatch at index " << i << ". expected " << want.sizes[i] << ", actual " << got.sizes[i];
      return o.str();
    }
  return std::nullopt;
}

bool same_value(const GuardItem& a, const GuardItem& b) {
  switch (a.kind) {
    case GuardItem::Kind::Int: return a.i == b.i;
    case GuardItem::Kind::Double: return a.d == b.d || (a.d != a.d && b.d != b.d);  // NaN guards equal NaN
    case GuardItem::Kind::Bool: return a.b == b.b;
    case GuardItem::Kind::String: return a.s == b.s;
    default: return true;
  }
}

// Python's repr of the guarded constant (shortest round-trip form for floats).
std::string value_text(const GuardItem& g) {
  std::ostringstream o;
  switch (g.kind) {
    case GuardItem::Kind::Int: o << g.i; break;
    case GuardItem::Kind::Double: {
      char buf[64];
      auto r = std::to_chars(buf, buf + sizeof buf, g.d);
      std::string t(buf, r.ptr);
      if (t.find_first_of(".eEn") == std::string::npos) t += ".0";
      o << t;
      break;
    }
    case GuardItem::Kind::Bool: o << (g.b ? "True" : "False"); break;
    case GuardItem::Kind::String: o << "'" << g.s << "'"; break;
    default: o << "None"; break;
  }
  return o.str();
}

}  // namespace

std::string dtype_text(c10::ScalarType t) { return c10::toString(t); }

InputSignature signature_of(const std::vector<c10::IValue>& inputs) {
  InputSignature sig;
  sig.num_args = inputs.size();
  for (size_t i = 0; i < inputs.size(); ++i) walk(inputs[i], "args[" + std::to_string(i) + "]", sig.items);
  return sig;
}

std::optional<std::string> guard_failure(const InputSignature& cached, const InputSignature& actual) {
  if (cached.num_args != actual.num_args) return "len(args) == " + std::to_string(cached.num_args);
  const size_t n = std::min(cached.items.size(), actual.items.size());
  for (size_t k = 0; k < n; ++k) {
    const GuardItem& want = cached.items[k];
    const GuardItem& got = actual.items[k];
    if (want.name != got.name || want.kind != got.kind ||
        ((want.kind == GuardItem::Kind::Object || want.kind == GuardItem::Kind::Other) && want.s != got.s))
      // Dynamo's TYPE_MATCH guard prints as ___check_type_id(<source>, <type id>).
      return "___check_type_id(" + want.name + ", " + type_text(want) + ")";
    switch (want.kind) {
      case GuardItem::Kind::Tensor:
        if (auto f = tensor_failure(want, got)) return f;
        break;
      case GuardItem::Kind::Int:
      case GuardItem::Kind::Double:
      case GuardItem::Kind::Bool:
      case GuardItem::Kind::String:
        if (!same_value(want, got)) return want.name + " == " + value_text(want);
        break;
      case GuardItem::Kind::Other:
        if (want.i != got.i) return "len(" + want.name + ") == " + std::to_string(want.i);
        break;
      case GuardItem::Kind::None:
      case GuardItem::Kind::Object:
        break;
    }
  }
  if (cached.items.size() != actual.items.size())  // unreachable when every container guards its length
    return "len(args) == " + std::to_string(cached.num_args);
  return std::nullopt;
}

}  // namespace hs::compile

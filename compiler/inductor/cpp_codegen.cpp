#include "cpp_codegen.h"
#include "kernel_math.h"
#include "pointwise_ops.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

namespace tessera::inductor {
namespace {

namespace g = sdk::graph;

// Below this many elements a kernel runs on one thread: waking the team costs more.
constexpr int64_t kParallelThreshold = 32768;

const char* ctype(int32_t dtype) {
  switch (dtype) {
    case TS_FLOAT32: return "float";
    case TS_FLOAT64: return "double";
    case TS_BOOL: return "uint8_t";  // read as bytes: GCC does not vectorise loads of bool
    default: return nullptr;
  }
}

// The loop body's expression for element `index` of input `i` (a mask compares its byte to 0).
std::string element(size_t i, int32_t dtype, const std::string& index) {
  const std::string load = "in" + std::to_string(i) + "[" + index + "]";
  return dtype == TS_BOOL ? "(" + load + " != 0)" : load;
}

// The sizes, strides and counts a kernel's loops use: literals in the source, or (runtime
// sizes) slots of the geometry array `g` the kernel receives, filled from this graph's values.
// Graphs that differ only in sizes then generate the same source, so they share one compiled
// library: ts.compile's dynamic shapes. Whether a stride is 0 or 1 stays a literal either way
// (it decides broadcasting and vectorisation, so it is part of the kernel's structure).
class Geometry {
 public:
  explicit Geometry(bool runtime) : runtime_(runtime) {}
  std::string operator()(int64_t value) {
    if (!runtime_) return std::to_string(value);
    values_.push_back(value);
    return "g[" + std::to_string(values_.size() - 1) + "]";
  }
  bool runtime() const { return runtime_; }
  std::vector<int64_t> take() { return std::move(values_); }

 private:
  bool runtime_;
  std::vector<int64_t> values_;
};

// The loop pragma over `numel` elements: a parallel loop for large kernels, a plain one below
// the threshold (not `parallel ... if(false)`: GCC then drops the simd part and the loop runs
// scalar). With runtime sizes the threshold is tested at run time around two copies of the loop.
std::string loop_pragma(int64_t numel, bool simd) {
  if (numel >= kParallelThreshold)
    return simd ? "#pragma omp parallel for simd schedule(static)" : "#pragma omp parallel for schedule(static)";
  return simd ? "#pragma omp simd" : "";
}

// `loop` (a for statement and its body, after the pragma) under the right pragma for `numel`.
void emit_loop(std::ostringstream& s, Geometry& geo, int64_t numel, const std::string& numel_expr, bool simd,
               const std::string& loop) {
  if (!geo.runtime()) {
    s << "  " << loop_pragma(numel, simd) << "\n" << loop;
    return;
  }
  s << "  if (" << numel_expr << " >= " << kParallelThreshold << ") {\n  " << loop_pragma(kParallelThreshold, simd)
    << "\n" << loop << "  } else {\n  " << loop_pragma(0, simd) << "\n" << loop << "  }\n";
}

// The offset of input `v` for output row `r` (rows: every dimension but the last), as C code.
std::string row_offset(const g::Value& v, const std::vector<int64_t>& out_shape, Geometry& geo) {
  const size_t nd = out_shape.size(), lead = nd - v.shape.size();
  std::ostringstream s;
  s << "0";
  std::string rest = "r";
  for (size_t d = nd - 1; d-- > 0;) {  // dims nd-2 .. 0, innermost first
    const int64_t size = out_shape[d];
    int64_t stride = 0;
    if (d >= lead && v.shape[d - lead] != 1) stride = v.strides[d - lead];
    const std::string size_expr = geo(size);
    if (stride != 0) s << " + ((" << rest << ") % " << size_expr << ") * " << geo(stride);
    rest = "(" + rest + ") / " + size_expr;
  }
  return s.str();
}

int64_t inner_stride(const g::Value& v, const std::vector<int64_t>& out_shape) {
  if (out_shape.empty() || v.shape.empty()) return 0;
  return v.shape.back() == 1 && out_shape.back() != 1 ? 0 : v.strides.back();
}

// As C code: 0 and 1 literal (they decide vectorisation), other strides from the geometry.
std::string inner_stride_expr(const g::Value& v, const std::vector<int64_t>& out_shape, Geometry& geo) {
  const int64_t stride = inner_stride(v, out_shape);
  return stride == 0 || stride == 1 ? std::to_string(stride) : geo(stride);
}

std::string index_of(const std::vector<int64_t>& inputs, int64_t id) {
  return std::to_string(std::find(inputs.begin(), inputs.end(), id) - inputs.begin());
}

// Kernel k's opening: its C signature and typed pointers to its input and output buffers. An
// output written over an input (FusedKernel::in_place) shares that input's memory: neither
// pointer of such a pair is restrict.
void emit_kernel_start(std::ostringstream& s, const g::Graph& graph, const FusedKernel& k, size_t index) {
  std::set<size_t> shared_in, shared_out;
  for (size_t o = 0; o < k.in_place.size(); ++o)
    if (k.in_place[o] >= 0) shared_out.insert(o), shared_in.insert(size_t(k.in_place[o]));
  s << "\nextern \"C\" void " << kernel_symbol(index) << "(void* const* in, void* const* out, const int64_t* g) {\n";
  for (size_t i = 0; i < k.inputs.size(); ++i) {
    const char* type = ctype(graph.value(k.inputs[i]).dtype);
    s << "  const " << type << (shared_in.count(i) ? "* in" : "* __restrict in") << i << " = (const " << type
      << "*)in[" << i << "];\n";
  }
  const char* t = ctype(k.dtype);
  for (size_t i = 0; i < k.outputs.size(); ++i)
    s << "  " << t << (shared_out.count(i) ? "* out" : "* __restrict out") << i << " = (" << t << "*)out[" << i
      << "];\n";
}

// A kernel headed by a row reduction: per row, the statistics (max and sum of exp, or mean and
// variance, accumulated in double), then one vectorised pass computing the head's result and the
// element-wise nodes after it.
void generate_row_kernel(std::ostringstream& source, const g::Graph& graph, const FusedKernel& k, size_t index,
                         Geometry& geo) {
  const std::string t = ctype(k.dtype);
  const std::string exp_fn = t == "float" ? "expf" : "exp";
  const g::Node& head = graph.nodes[k.head_node];
  int64_t numel = 1;
  for (int64_t e : k.shape) numel *= e;
  const std::string d = geo(k.shape.back()), rows = geo(numel / k.shape.back()), numel_expr = geo(numel);
  emit_kernel_start(source, graph, k, index);
  std::ostringstream s;  // the rows loop, put under its pragma (emit_loop) at the end
  s << "  for (int64_t r = 0; r < " << rows << "; ++r) {\n";
  std::map<int64_t, std::string> name;
  for (size_t i = 0; i < k.inputs.size(); ++i) {
    const g::Value& v = graph.value(k.inputs[i]);
    if (v.shape.size() > k.shape.size()) continue;  // not read element by element
    s << "    const int64_t base" << i << " = " << row_offset(v, k.shape, geo) << ";\n";
    name.emplace(k.inputs[i], element(i, v.dtype, "base" + std::to_string(i) + " + j * " +
                                                      inner_stride_expr(v, k.shape, geo)));
  }
  // The element-wise nodes that compute the head's row input(s), evaluated in every pass.
  auto emit_nodes = [&](const std::vector<size_t>& nodes, const std::string& indent) {
    std::ostringstream code;
    for (size_t n : nodes) {
      const g::Node& node = graph.nodes[n];
      auto operand = [&](int i) { return name.at(node.args[size_t(i)].tensor); };
      const int64_t out = node.outputs[0][0];
      code << indent << "const " << t << " v" << out << " = " << *lower_pointwise(node, operand, t) << ";\n";
      name[out] = "v" + std::to_string(out);
    }
    return code.str();
  };
  const std::string pro = emit_nodes(k.prologue, "      ");
  // A row input of the head: a prologue value, or the input buffer's row.
  auto row_input = [&](int64_t id) { return name.at(id); };
  auto pass = [&](const std::string& reduction, const std::string& body) {
    s << "    #pragma omp simd " << reduction << "\n    for (int64_t j = 0; j < " << d << "; ++j) {\n" << pro
      << "      " << body << "\n    }\n";
  };
  const std::string X = row_input(head.args[0].tensor);
  const int64_t result = head.outputs[0][0];
  std::string result_expr;
  if (k.head == RowHead::LayerNorm) {
    if (t == "float") {
      // One pass: sum and sum of squares in double. A float row's mean is at most ~1e7 of its
      // spread (float's own precision), where the double cancellation still leaves ~1e-2 of the
      // variance; the sum is centred on the float mean, as the two-pass form (and eager) centre
      // on it. A second pass over the row cost 10-15% of a LayerNorm+GELU+residual kernel.
      s << "    double sum = 0, sumsq = 0;\n";
      pass("reduction(+:sum) reduction(+:sumsq)", "const double xd = " + X + "; sum += xd; sumsq += xd * xd;");
      s << "    const " << t << " mean = " << t << "(sum / " << d << ");\n";
      s << "    const double dm = sum / " << d << " - double(mean);\n";
      s << "    double sq = sumsq - sum * sum / " << d << " + " << d << " * dm * dm;\n    sq = sq > 0 ? sq : 0;\n";
    } else {  // double rows: the mean may be any multiple of the spread, so centre first
      s << "    double sum = 0;\n";
      pass("reduction(+:sum)", "sum += " + X + ";");
      s << "    const " << t << " mean = " << t << "(sum / " << d << ");\n    double sq = 0;\n";
      pass("reduction(+:sq)", "const double c = double(" + X + ") - double(mean); sq += c * c;");
    }
    s << "    const " << t << " rstd = " << t << "(1.0 / __builtin_sqrt(sq / " << d << " + " << head.args[4].d
      << "));\n";
    for (size_t o = 1; o < head.outputs.size() && o < 3; ++o) {
      const int64_t id = head.outputs[o][0];
      auto it = std::find(k.outputs.begin(), k.outputs.end(), id);
      if (id >= 0 && it != k.outputs.end())
        s << "    out" << (it - k.outputs.begin()) << "[r] = " << (o == 1 ? "mean" : "rstd") << ";\n";
    }
    std::string y = "(" + X + " - mean) * rstd";
    if (head.args[2].kind == g::Arg::Kind::Tensor) y += " * in" + index_of(k.inputs, head.args[2].tensor) + "[j]";
    if (head.args[3].kind == g::Arg::Kind::Tensor) y = "(" + y + ") + in" + index_of(k.inputs, head.args[3].tensor) + "[j]";
    result_expr = "(" + y + ")";
    if (head.outputs.size() >= 3) {  // element-wise nodes may read the row's statistics too
      if (head.outputs[1][0] >= 0) name[head.outputs[1][0]] = "mean";
      if (head.outputs[2][0] >= 0) name[head.outputs[2][0]] = "rstd";
    }
  } else if (k.head == RowHead::SoftmaxBackward || k.head == RowHead::LogSoftmaxBackward) {
    // X: the gradient of the output; Y: the output. softmax: y (g - sum(g y)); log: g - exp(y) sum(g).
    const bool log = k.head == RowHead::LogSoftmaxBackward;
    const std::string Y = row_input(head.args[1].tensor);
    s << "    double dot = 0;\n";
    pass("reduction(+:dot)", "dot += " + (log ? X : "double(" + X + ") * double(" + Y + ")") + ";");
    s << "    const " << t << " sdot = " << t << "(dot);\n";
    result_expr = log ? "(" + X + " - " + exp_fn + "(" + Y + ") * sdot)" : "(" + Y + " * (" + X + " - sdot))";
  } else {
    // The row's max, vectorised (a NaN anywhere makes it NaN, as torch's max), then the sum of
    // exp(x - max) in the row's own precision, as the CPU plugin's softmax sums.
    // (has_nan is an int: GCC does not vectorise a reduction over bool.)
    s << "    " << t << " mx = -" << t << "(__builtin_inf());\n    int has_nan = 0;\n";
    pass("reduction(max:mx) reduction(|:has_nan)",
         "const " + t + " xv = " + X + "; mx = xv > mx ? xv : mx; has_nan |= int(xv != xv);");
    s << "    if (has_nan) mx = " << t << "(__builtin_nan(\"\"));\n    " << t << " sum = 0;\n";
    pass("reduction(+:sum)", "sum += " + exp_fn + "(" + X + " - mx);");
    if (k.head == RowHead::Softmax) {
      s << "    const " << t << " inv = " << t << "(1.0 / sum);\n";
      result_expr = "(" + exp_fn + "(" + X + " - mx) * inv)";
    } else {
      s << "    const " << t << " lse = mx + " << t << "(__builtin_log(sum));\n";
      result_expr = "(" + X + " - lse)";
    }
  }
  s << "    #pragma omp simd\n    for (int64_t j = 0; j < " << d << "; ++j) {\n";
  s << "      const int64_t i = r * " << d << " + j;\n" << pro;
  s << "      const " << t << " v" << result << " = " << result_expr << ";\n";
  name[result] = "v" + std::to_string(result);
  s << emit_nodes(k.nodes, "      ");
  for (size_t i = 0; i < k.outputs.size(); ++i) {
    const g::Value& v = graph.value(k.outputs[i]);
    if (v.shape == k.shape) s << "      out" << i << "[i] = v" << k.outputs[i] << ";\n";
  }
  s << "    }\n  }\n";
  emit_loop(source, geo, numel, numel_expr, false, s.str());
  source << "}\n";
}

// A kernel ending in a reduction: the prologue computed element by element and accumulated (sums
// in double, as the CPU plugin's; max and min in the compute type, NaN-propagating), then the
// nodes after it on each reduced value. Rows: one accumulator per row of the last dim. Columns
// (a bias gradient): per thread, accumulators across the last dim for its share of the rows,
// combined at the end. Middle: per outer index, accumulators across the inner block. Around:
// per kept index, one accumulator over the outer slices' inner runs. All: one accumulator, the
// elements split over the threads.
void generate_reduce_kernel(std::ostringstream& source, const g::Graph& graph, const FusedKernel& k, size_t index,
                            Geometry& geo) {
  using Op = Reduction::Op;
  using Over = Reduction::Over;
  const std::string t = ctype(k.dtype);
  const Reduction& red = k.reduction;
  const std::vector<int64_t>& shape = red.input_shape;
  int64_t numel = 1;
  for (int64_t e : shape) numel *= e;
  const int64_t inner_size = shape.back(), outer_size = numel / inner_size;
  const g::Node& head = graph.nodes[k.head_node];
  const int64_t reduced = head.outputs[0][0];
  const bool is_sum = red.op == Op::Sum || red.op == Op::Mean;
  const std::string acc_t = is_sum ? "double" : t;
  // Which kernel inputs the prologue reads (element by element) and which the nodes after the
  // reduction read (of the reduced shape, contiguous, by the reduced index).
  std::set<int64_t> made, pro_inputs;
  for (size_t n : k.prologue) made.insert(graph.nodes[n].outputs[0][0]);
  for (size_t n : k.prologue)
    for (const g::Arg& a : graph.nodes[n].args)
      if (a.kind == g::Arg::Kind::Tensor && !made.count(a.tensor)) pro_inputs.insert(a.tensor);

  emit_kernel_start(source, graph, k, index);

  const std::string D = geo(inner_size), R = geo(outer_size), N = geo(numel);
  const std::string count = red.over == Over::Rows      ? D
                            : red.over == Over::Columns ? R
                            : red.over == Over::Middle  ? geo(red.middle)
                            : red.over == Over::Around  ? geo(red.outer * red.inner)
                                                        : N;
  std::map<int64_t, std::string> name;
  // Per row r (all dims but the last of the input shape) the prologue inputs' offsets; in the
  // flat layouts (middle, around, all) the inputs are dense and read at i.
  std::ostringstream bases;
  for (size_t i = 0; i < k.inputs.size(); ++i) {
    if (!pro_inputs.count(k.inputs[i])) continue;
    const g::Value& v = graph.value(k.inputs[i]);
    if (red.reads_flat()) {  // dense (the plan checks): read at i
      name[k.inputs[i]] = element(i, v.dtype, "i");
      continue;
    }
    bases << "    const int64_t base" << i << " = " << row_offset(v, shape, geo) << ";\n";
    name[k.inputs[i]] = element(i, v.dtype, "base" + std::to_string(i) + " + j * " + inner_stride_expr(v, shape, geo));
  }
  // Element-wise nodes as C statements, each naming its value v<id> in `names`.
  auto emit_nodes = [&](std::ostringstream& b, const std::vector<size_t>& nodes, std::map<int64_t, std::string>& names,
                        const std::string& indent) {
    for (size_t n : nodes) {
      const g::Node& node = graph.nodes[n];
      auto operand = [&](int a) { return names.at(node.args[size_t(a)].tensor); };
      const int64_t out = node.outputs[0][0];
      b << indent << "const " << t << " v" << out << " = " << *lower_pointwise(node, operand, t) << ";\n";
      names[out] = "v" + std::to_string(out);
    }
  };
  // The prologue's nodes, its values that leave the kernel (written at i), and the accumulation.
  auto element_body = [&](const std::string& indent, const std::string& acc, const std::string& nan) {
    std::ostringstream b;
    emit_nodes(b, k.prologue, name, indent);
    for (size_t i = 0; i < k.outputs.size(); ++i)
      if (made.count(k.outputs[i])) b << indent << "out" << i << "[i] = v" << k.outputs[i] << ";\n";
    const std::string x = name.at(head.args[0].tensor);
    if (is_sum) b << indent << acc << " += " << x << ";\n";
    else
      b << indent << acc << " = " << x << (red.op == Op::Max ? " > " : " < ") << acc << " ? " << x << " : " << acc
        << ";\n" << indent << nan << " |= int(" << x << " != " << x << ");\n";
    return b.str();
  };
  const std::string init = is_sum ? "0" : std::string(red.op == Op::Max ? "-" : "") + t + "(__builtin_inf())";
  auto finalize = [&](const std::string& acc, const std::string& nan) {
    if (red.op == Op::Sum) return t + "(" + acc + ")";
    if (red.op == Op::Mean) return t + "(" + acc + " / double(" + count + "))";
    return "(" + nan + " ? " + t + "(__builtin_nan(\"\")) : " + acc + ")";
  };
  // The nodes after the reduction, at reduced index `at`, and the reduced-shape outputs.
  auto reduced_body = [&](const std::string& indent, const std::string& value, const std::string& at) {
    std::ostringstream b;
    std::map<int64_t, std::string> names;
    for (size_t i = 0; i < k.inputs.size(); ++i)
      names[k.inputs[i]] = element(i, graph.value(k.inputs[i]).dtype, at);
    b << indent << "const " << t << " v" << reduced << " = " << value << ";\n";
    names[reduced] = "v" + std::to_string(reduced);
    emit_nodes(b, k.nodes, names, indent);
    for (size_t i = 0; i < k.outputs.size(); ++i)
      if (!made.count(k.outputs[i])) b << indent << "out" << i << "[" << at << "] = v" << k.outputs[i] << ";\n";
    return b.str();
  };
  const std::string sum_clause = is_sum ? "reduction(+:acc)" : std::string("reduction(") +
                                                                  (red.op == Op::Max ? "max" : "min") +
                                                                  ":acc) reduction(|:has_nan)";
  if (red.over == Over::All) {
    std::ostringstream& s = source;
    s << "  " << acc_t << " acc = " << init << ";\n  int has_nan = 0;\n";
    const std::string loop = "  for (int64_t i = 0; i < " + N + "; ++i) {\n" + element_body("    ", "acc", "has_nan") + "  }\n";
    const std::string parallel = "  #pragma omp parallel for simd schedule(static) " + sum_clause + "\n";
    const std::string serial = "  #pragma omp simd " + sum_clause + "\n";
    if (geo.runtime())
      s << "  if (" << N << " >= " << kParallelThreshold << ") {\n" << parallel << loop << "  } else {\n" << serial << loop
        << "  }\n";
    else
      s << (numel >= kParallelThreshold ? parallel : serial) << loop;
    s << "  {\n" << reduced_body("    ", finalize("acc", "has_nan"), "0") << "  }\n}\n";
    return;
  }
  if (red.over == Over::Rows) {
    std::ostringstream loop;
    loop << "  for (int64_t r = 0; r < " << R << "; ++r) {\n" << bases.str();
    loop << "    " << acc_t << " acc = " << init << ";\n    int has_nan = 0;\n";
    loop << "    #pragma omp simd " << sum_clause << "\n    for (int64_t j = 0; j < " << D << "; ++j) {\n";
    loop << "      const int64_t i = r * " << D << " + j;\n" << element_body("      ", "acc", "has_nan") << "    }\n";
    loop << reduced_body("    ", finalize("acc", "has_nan"), "r") << "  }\n";
    emit_loop(source, geo, numel, N, false, loop.str());
    source << "}\n";
    return;
  }
  if (red.over == Over::Middle) {
    // Per outer index (in parallel): its middle rows of `inner` elements streamed in order into
    // `inner` accumulators of its own, then the nodes after the reduction on each.
    const std::string O = geo(red.outer), M = geo(red.middle), I = geo(red.inner);
    std::ostringstream loop;
    loop << "  for (int64_t o = 0; o < " << O << "; ++o) {\n";
    loop << "    " << acc_t << "* const acc = (" << acc_t << "*)malloc(sizeof(" << acc_t << ") * " << I << ");\n";
    loop << "    int* const nan_of = (int*)malloc(sizeof(int) * " << I << ");\n";
    loop << "    for (int64_t j = 0; j < " << I << "; ++j) { acc[j] = " << init << "; nan_of[j] = 0; }\n";
    loop << "    for (int64_t m = 0; m < " << M << "; ++m) {\n      #pragma omp simd\n";
    loop << "      for (int64_t j = 0; j < " << I << "; ++j) {\n";
    loop << "        const int64_t i = (o * " << M << " + m) * " << I << " + j;\n"
         << element_body("        ", "acc[j]", "nan_of[j]") << "      }\n    }\n";
    loop << "    for (int64_t j = 0; j < " << I << "; ++j) {\n"
         << reduced_body("      ", finalize("acc[j]", "nan_of[j]"), "o * " + I + " + j") << "    }\n";
    loop << "    free(acc);\n    free(nan_of);\n  }\n";
    emit_loop(source, geo, numel, N, false, loop.str());
    source << "}\n";
    return;
  }
  if (red.over == Over::Around) {
    // Per kept index (in parallel): one accumulator over its `inner` runs in each outer slice.
    const std::string O = geo(red.outer), K = geo(red.middle), I = geo(red.inner);
    std::ostringstream loop;
    loop << "  for (int64_t c = 0; c < " << K << "; ++c) {\n";
    loop << "    " << acc_t << " acc = " << init << ";\n    int has_nan = 0;\n";
    loop << "    for (int64_t o = 0; o < " << O << "; ++o) {\n      #pragma omp simd " << sum_clause << "\n";
    loop << "      for (int64_t j = 0; j < " << I << "; ++j) {\n";
    loop << "        const int64_t i = (o * " << K << " + c) * " << I << " + j;\n"
         << element_body("        ", "acc", "has_nan") << "      }\n    }\n";
    loop << reduced_body("    ", finalize("acc", "has_nan"), "c") << "  }\n";
    emit_loop(source, geo, numel, N, false, loop.str());
    source << "}\n";
    return;
  }
  // Columns: each thread streams a contiguous share of the rows into accumulators of its own
  // across the whole last dim (memory read in order, the accumulators in cache); the shares are
  // then combined per column. A column at a time would stride through memory instead.
  source << "  const int nth = " << N << " >= " << kParallelThreshold << " ? omp_get_max_threads() : 1;\n";
  source << "  " << acc_t << "* const accs = (" << acc_t << "*)malloc(sizeof(" << acc_t << ") * nth * " << D << ");\n";
  source << "  int* const nans = (int*)malloc(sizeof(int) * nth * " << D << ");\n";
  source << "  for (int64_t j = 0; j < nth * " << D << "; ++j) { accs[j] = " << init << "; nans[j] = 0; }\n";
  source << "  #pragma omp parallel num_threads(nth)\n  {\n";
  source << "    const int64_t tid = omp_get_thread_num(), nt = omp_get_num_threads();\n";
  source << "    " << acc_t << "* const acc = accs + tid * " << D << ";\n    int* const nan_of = nans + tid * " << D << ";\n";
  source << "    for (int64_t r = " << R << " * tid / nt; r < " << R << " * (tid + 1) / nt; ++r) {\n" << bases.str();
  source << "      #pragma omp simd\n      for (int64_t j = 0; j < " << D << "; ++j) {\n";
  source << "        const int64_t i = r * " << D << " + j;\n" << element_body("        ", "acc[j]", "nan_of[j]")
         << "      }\n    }\n  }\n";
  source << "  for (int64_t j = 0; j < " << D << "; ++j) {\n    " << acc_t << " total = accs[j];\n    int any_nan = nans[j];\n";
  source << "    for (int t = 1; t < nth; ++t) {\n      const " << acc_t << " part = accs[t * " << D << " + j];\n";
  if (is_sum) source << "      total += part;\n";
  else source << "      total = part" << (red.op == Op::Max ? " > " : " < ") << "total ? part : total;\n";
  source << "      any_nan |= nans[t * " << D << " + j];\n    }\n";
  source << reduced_body("    ", finalize("total", "any_nan"), "j") << "  }\n";
  source << "  free(accs);\n  free(nans);\n}\n";
}

void generate_kernel(std::ostringstream& s, const g::Graph& graph, const FusedKernel& k, size_t index, Geometry& geo) {
  if (k.head == RowHead::Reduction) return generate_reduce_kernel(s, graph, k, index, geo);
  if (k.head != RowHead::None) return generate_row_kernel(s, graph, k, index, geo);
  const std::string t = ctype(k.dtype);
  int64_t numel = 1;
  for (int64_t d : k.shape) numel *= d;
  const int64_t inner_size = k.shape.empty() ? 1 : k.shape.back();
  const std::string numel_expr = geo(numel);
  bool dense = true;
  for (int64_t id : k.inputs) {
    const g::Value& v = graph.value(id);
    dense &= v.shape == k.shape && v.is_contiguous();
  }
  emit_kernel_start(s, graph, k, index);
  std::map<int64_t, std::string> name;  // value id -> C expression inside the loop body
  // The loop body: each node's value, then the kernel's outputs. With `fast_trig`, sin and cos
  // take the inline form and each of their arguments is checked against its range into `bad`.
  auto body = [&](std::map<int64_t, std::string> name, const std::string& indent, bool fast_trig) {
    std::ostringstream b;
    for (size_t n : k.nodes) {
      const g::Node& node = graph.nodes[n];
      auto operand = [&](int i) { return name.at(node.args[size_t(i)].tensor); };
      auto expr = lower_pointwise(node, operand, t, fast_trig);
      const int64_t out = node.outputs[0][0];
      if (fast_trig && is_trigonometric(node.op)) b << indent << "bad |= ts_trig_out_of_range(" << operand(0) << ");\n";
      b << indent << "const " << t << " v" << out << " = " << *expr << ";\n";
      name[out] = "v" + std::to_string(out);
    }
    for (size_t i = 0; i < k.outputs.size(); ++i) b << indent << "out" << i << "[i] = v" << k.outputs[i] << ";\n";
    return b.str();
  };
  bool trig = false;
  for (size_t n : k.nodes) trig |= is_trigonometric(graph.nodes[n].op);
  if (dense && trig && t == "float") {
    // Chunks of the inline sin/cos, each redone with the library's when an argument is beyond
    // the inline reduction's range (or NaN): the fast form costs a third less than SLEEF's.
    for (size_t i = 0; i < k.inputs.size(); ++i) name[k.inputs[i]] = element(i, graph.value(k.inputs[i]).dtype, "i");
    const int64_t chunk = 4096;
    std::ostringstream loop;
    loop << "  for (int64_t c = 0; c < " << numel_expr << "; c += " << chunk << ") {\n";
    loop << "    const int64_t end = c + " << chunk << " < " << numel_expr << " ? c + " << chunk << " : " << numel_expr
         << ";\n";
    loop << "    int bad = 0;\n    #pragma omp simd reduction(|:bad)\n    for (int64_t i = c; i < end; ++i) {\n";
    loop << body(name, "      ", true) << "    }\n";
    loop << "    if (bad) {\n      #pragma omp simd\n      for (int64_t i = c; i < end; ++i) {\n";
    loop << body(name, "        ", false) << "      }\n    }\n  }\n";
    emit_loop(s, geo, numel, numel_expr, false, loop.str());
    s << "}\n";
    return;
  }
  if (dense) {
    for (size_t i = 0; i < k.inputs.size(); ++i) name[k.inputs[i]] = element(i, graph.value(k.inputs[i]).dtype, "i");
    emit_loop(s, geo, numel, numel_expr, true,
              "  for (int64_t i = 0; i < " + numel_expr + "; ++i) {\n" + body(name, "    ", false) + "  }\n");
    s << "}\n";
    return;
  }
  const std::string inner = geo(inner_size), outer = geo(inner_size == 0 ? 0 : numel / inner_size);
  std::ostringstream loop;
  loop << "  for (int64_t r = 0; r < " << outer << "; ++r) {\n";
  for (size_t i = 0; i < k.inputs.size(); ++i) {
    const g::Value& v = graph.value(k.inputs[i]);
    loop << "    const int64_t base" << i << " = " << row_offset(v, k.shape, geo) << ";\n";
    name[k.inputs[i]] = element(i, v.dtype, "base" + std::to_string(i) + " + j * " +
                                                inner_stride_expr(v, k.shape, geo));
  }
  loop << "    #pragma omp simd\n    for (int64_t j = 0; j < " << inner << "; ++j) {\n";
  loop << "      const int64_t i = r * " << inner << " + j;\n";
  loop << body(name, "      ", false) << "    }\n  }\n";
  emit_loop(s, geo, numel, numel_expr, false, loop.str());
  s << "}\n";
}

}  // namespace

std::string kernel_symbol(size_t k) { return "tessera_kernel_" + std::to_string(k); }

GeneratedSource generate_cpp(const g::Graph& graph, const FusionPlan& plan, const CodegenOptions& options) {
  std::ostringstream s;
  s << "// Generated by Tessera's inductor plugin from a captured graph.\n";
  for (const FusedKernel& k : plan.kernels)
    if (k.head == RowHead::Reduction &&
        (k.reduction.over == Reduction::Over::Columns || k.reduction.over == Reduction::Over::Middle)) {
      s << "#include <omp.h>\n#include <stdlib.h>\n";  // per-thread accumulators (generate_reduce_kernel)
      break;
    }
  s << kernel_math_prelude(options.vector_math);
  GeneratedSource out;
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    Geometry geo(options.runtime_sizes);
    generate_kernel(s, graph, plan.kernels[k], k, geo);
    out.geometry.push_back(geo.take());
  }
  out.source = s.str();
  return out;
}

}  // namespace tessera::inductor

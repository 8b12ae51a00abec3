// libtessera_tracer.so: graph capture as a transform plugin on the Tracer key.
// While a capture is open on a thread, the thread's included keys hold Tracer, so every
// operator call reaches this plugin's boxed fallback first. Composites decompose above it
// (the dispatcher serves the Tracer key with an operator's composite), so only primitives
// are recorded; each is recorded, then run below the Tracer key with real tensors.
// Frontends drive a capture with the tracer:: operators defined here.
#include "recorder.h"

#include <tessera/sdk/ops.h>

#include <atomic>
#include <memory>

namespace tessera::tracer {
namespace {

ts_dispatch_key tracer_key = -1;
ts_keyset tracer_bit() { return ts_keyset(1) << tracer_key; }
ts_keyset autograd_bits = 0;  // grad mode is off while the thread excludes these

thread_local std::unique_ptr<Recorder> active;
thread_local std::unique_ptr<Recorder> finished;  // the last capture, until its constants are taken
uint64_t next_trace_id() {
  static std::atomic<uint64_t> next{1};
  return next++;
}

void set_tracing(bool on) {
  ts_keyset included = 0, excluded = 0;
  sdk::host().tls_keys(&included, &excluded);
  sdk::host().set_tls_keys(on ? included | tracer_bit() : included & ~tracer_bit(), excluded);
}

Recorder& recorder(const char* op) {
  if (!active) sdk::fail(TS_ERROR, op, ": no capture is open on this thread (call tracer::begin first)");
  return *active;
}

void begin(sdk::Args& a) {
  if (active) sdk::fail(TS_ERROR, "tracer::begin: a capture is already open on this thread; captures do not nest");
  active = std::make_unique<Recorder>(next_trace_id(), [](ts_tensor t) {
    sdk::ExcludeKeysGuard below(tracer_bit());
    return sdk::ops::clone(sdk::TensorRef::borrow(t));
  });
  set_tracing(true);
  a.returns({});
}

void input(sdk::Args& a) {
  recorder("tracer::input").add_input(a.tensor(0).handle());
  a.returns({});
}

void end(sdk::Args& a) {
  Recorder& r = recorder("tracer::end");
  std::vector<ts_tensor> outputs;
  for (const auto& t : a.tensor_list(0)) outputs.push_back(t.handle());
  thread_local std::string text;  // a str return lives until this thread's next call here
  text = r.finish(outputs);
  set_tracing(false);
  finished = std::move(active);
  ts_value v{TS_VALUE_STRING, 0, {}};
  v.u.str = text.c_str();
  a.returns({v});
}

void abort_capture(sdk::Args& a) {
  if (active) set_tracing(false);
  active.reset();
  a.returns({});
}

// The tensors the last finished capture lifted as constants, in graph.constants order.
void constants(sdk::Args& a) {
  if (!finished) sdk::fail(TS_ERROR, "tracer::constants: no finished capture on this thread");
  thread_local std::vector<ts_tensor> handles;
  handles.clear();
  for (const auto& t : finished->constants()) handles.push_back(t.new_reference());
  ts_value v{TS_VALUE_TENSOR_LIST, 0, {}};
  v.u.tensors.data = handles.data();
  v.u.tensors.size = int64_t(handles.size());
  a.returns({v});
}

// What record_resizes records: resizes `self` (contiguous) as the host resizes an out= tensor.
void resize(sdk::Args& a) {
  sdk::TensorRef self = a.tensor(0);
  const auto size = a.int_list(1);
  std::vector<int64_t> shape(size.begin(), size.end());
  sdk::resize(a.call(), self, shape);
  a.return_argument(self);
}

// The number of nodes recorded so far: where the backward part of a joint capture starts.
void mark(sdk::Args& a) { a.returns({sdk::value(int64_t(recorder("tracer::mark").node_count()))}); }

// "op1,op2": the operators of the last finished capture that read a number out of a tensor.
void data_dependent_reads(sdk::Args& a) {
  thread_local std::string text;
  text.clear();
  if (finished)
    for (const auto& op : finished->data_dependent_reads()) text += (text.empty() ? "" : ",") + op;
  ts_value v{TS_VALUE_STRING, 0, {}};
  v.u.str = text.c_str();
  a.returns({v});
}

ts_status trace_fallback(void*, ts_call call, ts_keyset, ts_stack* stack) noexcept {
  const ts_host_api& host = sdk::host();
  ts_operator op = host.call_operator_of(call);
  // Arguments are read before the call: its returns overwrite the stack.
  std::vector<ts_value> arguments(stack->values, stack->values + stack->size);
  // Version counters before the call: a kernel that writes an argument it does not return
  // (batch norm's running statistics) bumps it, and the node records that argument as written.
  std::vector<uint64_t> versions(arguments.size(), 0);
  for (size_t i = 0; i < arguments.size(); ++i)
    if (arguments[i].tag == TS_VALUE_TENSOR && arguments[i].u.tensor)
      versions[i] = host.tensor_version(arguments[i].u.tensor);
  if (active) {
    try {
      active->record_resizes(arguments);
      active->snapshot_unwritten(arguments);
    } catch (const std::exception& e) {
      host.set_error(call, e.what());
      return TS_ERROR;
    }
  }
  ts_status status;
  {
    sdk::ExcludeKeysGuard below(tracer_bit());  // kernels' own inner calls are not the program's
    status = host.call_operator(call, op, stack);
  }
  if (status != TS_OK || !active) return status;
  try {
    ts_keyset included = 0, excluded = 0;
    host.tls_keys(&included, &excluded);
    active->record(host.operator_name(op), arguments, versions, stack, (excluded & autograd_bits) == 0);
    return TS_OK;
  } catch (const sdk::HostFailure& e) {
    return e.status;
  } catch (const std::exception& e) {
    host.set_error(call, e.what());
    return TS_ERROR;
  }
}

// Autograd calls a graph cannot replay (backward inside the function, hooks, requires_grad_,
// .grad reads and writes — an optimizer step reads whatever .grad is now): the capture notes a break and the call runs below the Tracer key with the
// thread's keys untouched, so what it dispatches in turn (backward's formulas) is still seen.
ts_status break_kernel(void*, ts_call call, ts_keyset keys, ts_stack* stack) noexcept {
  const ts_host_api& host = sdk::host();
  ts_operator op = host.call_operator_of(call);
  if (active) active->note_data_dependent_read(host.operator_name(op));
  return host.redispatch(call, op, keys & (tracer_bit() - 1), stack);
}

void register_tracer(sdk::Registrar& reg) {
  sdk::check_host(sdk::host().find_dispatch_key("Tracer", &tracer_key));
  for (const char* name : {"AutogradCPU", "AutogradCUDA", "AutogradHIP", "AutogradOther"}) {
    ts_dispatch_key k = -1;
    if (sdk::host().find_dispatch_key(name, &k) == TS_OK && k >= 0) autograd_bits |= ts_keyset(1) << k;
  }
  struct Op {
    const char* schema;
    const char* name;
    sdk::KernelFn fn;
  };
  const Op ops[] = {
      {"tracer::begin() -> ()", "tracer::begin", begin},
      {"tracer::input(Tensor x) -> ()", "tracer::input", input},
      {"tracer::end(Tensor[] outputs) -> str", "tracer::end", end},
      {"tracer::abort() -> ()", "tracer::abort", abort_capture},
      {"tracer::mark() -> int", "tracer::mark", mark},
      {"tracer::resize_(Tensor(a!) self, int[] size) -> Tensor(a!)", "tracer::resize_", resize},
      {"tracer::constants() -> Tensor[]", "tracer::constants", constants},
      {"tracer::data_dependent_reads() -> str", "tracer::data_dependent_reads", data_dependent_reads},
  };
  for (const Op& op : ops) {
    reg.def(op.schema);
    reg.kernel(op.name, TS_KEY_CATCH_ALL, op.fn);
  }
  sdk::check_host(sdk::host().register_fallback(reg.raw(), tracer_key, trace_fallback, nullptr));
  // Operators served by a catch-all kernel never reach the fallback; those whose meaning a
  // graph must keep get the fallback as their Tracer kernel (autograd's detach cuts gradients).
  for (const char* op : {"autograd::detach"})
    if (sdk::host().find_operator(op)) reg.boxed_kernel(op, tracer_key, trace_fallback, nullptr);
  for (const char* op : {"autograd::backward", "autograd::grad", "autograd::get_grad", "autograd::register_hook",
                         "autograd::retain_grad", "autograd::requires_grad_", "autograd::set_grad"})
    if (sdk::host().find_operator(op)) reg.boxed_kernel(op, tracer_key, break_kernel, nullptr);
}

}  // namespace
}  // namespace tessera::tracer

// Needs host ABI 1.2 (transform keys and extension slots).
TESSERA_PLUGIN("tracer", "0.1.0", 2, tessera::tracer::register_tracer)

// The dispatcher: key priority, redispatch, fallbacks, fallthrough, TLS guards, listeners,
// missing-kernel errors, introspection, and calls racing with registration.
#include <tessera/tessera.h>

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

using namespace tessera;

namespace {

// Kernels record which key ran them in `call_trace`, then return their first argument.
thread_local std::vector<std::string> call_trace;

ts_status record(void* data, ts_call, ts_keyset, ts_stack* stack) {
  call_trace.push_back(static_cast<const char*>(data));
  host_api()->tensor_retain(stack->values[0].u.tensor);
  stack->size = 1;
  return TS_OK;
}

// A transform-like kernel: records itself, then redispatches below its own key.
ts_status record_and_redispatch(void* data, ts_call call, ts_keyset keys, ts_stack* stack) {
  call_trace.push_back(static_cast<const char*>(data));
  auto* ctx = reinterpret_cast<CallContext*>(call);
  int32_t own = ctx->key;
  return host_api()->redispatch(call, reinterpret_cast<ts_operator>(const_cast<OperatorEntry*>(ctx->op)),
                                DispatchKeySet(keys).below(own).raw(), stack);
}

ts_status failing(void*, ts_call call, ts_keyset, ts_stack*) {
  host_api()->set_error(call, "expected a positive input, got -1");
  return TS_ERROR_VALUE;
}

Tensor call1(OperatorHandle op, const Tensor& x) {
  ts_value v[1];
  detail::box(v[0], x);
  ts_stack stack{sizeof(ts_stack), v, 1, 1};
  Dispatcher::instance().call(op, &stack);
  return detail::unbox_tensor(v[0]);
}

KernelEntry kernel(ts_kernel_fn fn, const char* tag) { return KernelEntry{fn, const_cast<char*>(tag), "test", false}; }

Tensor tensor_with_keys(DispatchKeySet extra) {
  Tensor t = zeros({2});
  t.impl()->set_key_set(t.impl()->key_set() | extra);
  return t;
}

constexpr int32_t kCPU = int32_t(DispatchKey::CPU);

}  // namespace

TEST(Dispatcher, HighestPriorityKeyRunsFirstAndRedispatchGoesBelow) {
  auto op = Dispatcher::instance().def("dtest::prio(Tensor self) -> Tensor", "test");
  auto& d = Dispatcher::instance();
  d.register_kernel("dtest::prio", kCPU, kernel(record, "CPU"));
  d.register_kernel("dtest::prio", int32_t(DispatchKey::Batched), kernel(record_and_redispatch, "Batched"));
  d.register_kernel("dtest::prio", int32_t(DispatchKey::Tracer), kernel(record_and_redispatch, "Tracer"));
  call_trace.clear();
  call1(op, tensor_with_keys(DispatchKey::Batched));
  EXPECT_EQ(call_trace, (std::vector<std::string>{"Batched", "CPU"}));
  call_trace.clear();
  call1(op, tensor_with_keys(DispatchKeySet(DispatchKey::Batched) | DispatchKey::Tracer));
  EXPECT_EQ(call_trace, (std::vector<std::string>{"Tracer", "Batched", "CPU"}));
  call_trace.clear();
  call1(op, zeros({2}));
  EXPECT_EQ(call_trace, (std::vector<std::string>{"CPU"}));
}

TEST(Dispatcher, KeySetOfAllTensorArgumentsIsUsed) {
  auto op = Dispatcher::instance().def("dtest::two(Tensor a, Tensor b) -> Tensor", "test");
  auto& d = Dispatcher::instance();
  d.register_kernel("dtest::two", kCPU, kernel(record, "CPU"));
  d.register_kernel("dtest::two", int32_t(DispatchKey::Autocast), kernel(record_and_redispatch, "Autocast"));
  call_trace.clear();
  ts_value v[2];
  Tensor a = zeros({1}), b = tensor_with_keys(DispatchKey::Autocast);
  detail::box(v[0], a);
  detail::box(v[1], b);
  ts_stack stack{sizeof(ts_stack), v, 2, 2};
  d.call(op, &stack);
  detail::unbox_tensor(v[0]);
  EXPECT_EQ(call_trace, (std::vector<std::string>{"Autocast", "CPU"}));
}

TEST(Dispatcher, BoxedFallbackServesOperatorsWithoutOwnKernel) {
  auto& d = Dispatcher::instance();
  auto op = d.def("dtest::fb(Tensor self) -> Tensor", "test");
  d.register_kernel("dtest::fb", kCPU, kernel(record, "CPU"));
  d.register_fallback(int32_t(DispatchKey::AutogradOther), kernel(record_and_redispatch, "fallback"));
  call_trace.clear();
  call1(op, tensor_with_keys(DispatchKey::AutogradOther));
  EXPECT_EQ(call_trace, (std::vector<std::string>{"fallback", "CPU"}));
  // An operator-specific kernel wins over the fallback.
  auto op2 = d.def("dtest::fb2(Tensor self) -> Tensor", "test");
  d.register_kernel("dtest::fb2", kCPU, kernel(record, "CPU"));
  d.register_kernel("dtest::fb2", int32_t(DispatchKey::AutogradOther), kernel(record, "own"));
  call_trace.clear();
  call1(op2, tensor_with_keys(DispatchKey::AutogradOther));
  EXPECT_EQ(call_trace, (std::vector<std::string>{"own"}));
}

TEST(Dispatcher, FallthroughSkipsTheKey) {
  auto& d = Dispatcher::instance();
  auto op = d.def("dtest::ft(Tensor self) -> Tensor", "test");
  d.register_kernel("dtest::ft", kCPU, kernel(record, "CPU"));
  d.register_fallthrough("dtest::ft", int32_t(DispatchKey::Python), "test");
  call_trace.clear();
  call1(op, tensor_with_keys(DispatchKey::Python));
  EXPECT_EQ(call_trace, (std::vector<std::string>{"CPU"}));
  auto rows = d.describe("dtest::ft");
  ASSERT_GE(rows.size(), 2u);
  EXPECT_EQ(rows[0].key, "Python");
  EXPECT_EQ(rows[0].kind, "fallthrough");
}

TEST(Dispatcher, ThreadLocalIncludeAndExcludeGuards) {
  auto& d = Dispatcher::instance();
  auto op = d.def("dtest::tls(Tensor self) -> Tensor", "test");
  d.register_kernel("dtest::tls", kCPU, kernel(record, "CPU"));
  d.register_kernel("dtest::tls", int32_t(DispatchKey::Tracer), kernel(record_and_redispatch, "Tracer"));
  Tensor x = zeros({2});
  call_trace.clear();
  {
    IncludeDispatchKeyGuard include(DispatchKey::Tracer);
    call1(op, x);
  }
  EXPECT_EQ(call_trace, (std::vector<std::string>{"Tracer", "CPU"}));
  call_trace.clear();
  call1(op, x);  // the guard is gone
  EXPECT_EQ(call_trace, (std::vector<std::string>{"CPU"}));
  call_trace.clear();
  {
    ExcludeDispatchKeyGuard exclude(DispatchKey::Tracer);
    call1(op, tensor_with_keys(DispatchKey::Tracer));
  }
  EXPECT_EQ(call_trace, (std::vector<std::string>{"CPU"}));
  // Guards are per thread: another thread does not see this thread's include.
  IncludeDispatchKeyGuard include(DispatchKey::Tracer);
  std::vector<std::string> other_trace;
  std::thread([&] {
    call1(op, x);
    other_trace = call_trace;
  }).join();
  EXPECT_EQ(other_trace, (std::vector<std::string>{"CPU"}));
}

TEST(Dispatcher, MissingKernelNamesOperatorKeyAndRegisteredKeys) {
  auto& d = Dispatcher::instance();
  auto op = d.def("dtest::missing(Tensor self) -> Tensor", "test");
  d.register_kernel("dtest::missing", int32_t(DispatchKey::Tracer), kernel(record_and_redispatch, "Tracer"));
  try {
    call1(op, zeros({1}));
    FAIL() << "expected NotImplementedError";
  } catch (const NotImplementedError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("dtest::missing"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'CPU'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[Tracer]"), std::string::npos) << msg;
  }
}

TEST(Dispatcher, KernelErrorIsRaisedWithOperatorPluginAndDevice) {
  auto& d = Dispatcher::instance();
  auto op = d.def("dtest::fails(Tensor self) -> Tensor", "test");
  d.register_kernel("dtest::fails", kCPU, kernel(failing, "x"));
  try {
    call1(op, zeros({1}));
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("dtest::fails"), std::string::npos) << msg;
    EXPECT_NE(msg.find("expected a positive input, got -1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("plugin 'test'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("device cpu"), std::string::npos) << msg;
  }
}

TEST(Dispatcher, ListenersFireOnDefNotOnImpl) {
  init();  // the built-in operators
  auto& d = Dispatcher::instance();
  std::vector<std::string> seen;
  int id = d.add_listener([&](OperatorHandle op) { seen.push_back(op->name()); });
  d.def("dtest::listened(Tensor self) -> Tensor", "test");
  d.register_kernel("dtest::listened", kCPU, kernel(record, "CPU"));
  d.remove_listener(id);
  d.def("dtest::after_removal(Tensor self) -> Tensor", "test");
  EXPECT_EQ(seen, (std::vector<std::string>{"dtest::listened"}));
  // Replaying reports every existing operator, built-ins included.
  int count = 0;
  int id2 = d.add_listener([&](OperatorHandle) { ++count; }, /*replay_existing=*/true);
  d.remove_listener(id2);
  EXPECT_GT(count, 150);
}

TEST(Dispatcher, RedefiningAnOperatorIsAnError) {
  auto& d = Dispatcher::instance();
  d.def("dtest::once(Tensor self) -> Tensor", "test");
  EXPECT_THROW(d.def("dtest::once(Tensor self) -> Tensor", "test"), RuntimeError);
  EXPECT_THROW(d.def("dtest::bad(Tensor self -> Tensor", "test"), SchemaError);
}

TEST(Dispatcher, IntrospectionListsKernelsAndPlugins) {
  zeros({1});  // loads the CPU plugin
  auto rows = Dispatcher::instance().describe("add.Tensor");
  bool found = false;
  for (auto& r : rows)
    if (r.key == "CPU" && r.plugin == "cpu" && r.kind == "kernel") found = true;
  EXPECT_TRUE(found);
  std::string text = Dispatcher::instance().describe_text("add.Tensor");
  EXPECT_NE(text.find("add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"), std::string::npos) << text;
}

TEST(Dispatcher, ConcurrentCallsWhileAnotherThreadRegisters) {
  auto& d = Dispatcher::instance();
  auto op = d.def("dtest::hot(Tensor self) -> Tensor", "test");
  d.register_kernel("dtest::hot", kCPU, kernel(record, "CPU"));
  Tensor x = zeros({4});
  std::atomic<bool> stop{false};
  std::atomic<int64_t> calls{0}, wrong{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&] {
      while (!stop.load()) {
        Tensor y = call1(op, x);
        if (y.impl() != x.impl()) ++wrong;
        call_trace.clear();
        ++calls;
      }
    });
  for (int i = 0; i < 300; ++i) {
    std::string name = fmt::format("dtest::reg{}", i);
    d.def(fmt::format("{}(Tensor self) -> Tensor", name), "test");
    d.register_kernel(name, kCPU, kernel(record, "CPU"));
    // Re-registering the hot operator at an unrelated key while it is being called.
    d.register_kernel("dtest::hot", int32_t(DispatchKey::FirstDynamicBackend) + 10, kernel(record, "other"));
  }
  while (calls.load() < 10000) std::this_thread::yield();
  stop = true;
  for (auto& t : callers) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GE(calls.load(), 10000);
  EXPECT_NE(d.find("dtest::reg299"), nullptr);
}

// Composite kernels (ABI 1.4): an implicit composite serves backend and Autograd keys that have
// no kernel of their own; an explicit one serves backend keys only; a device's own kernel wins.
TEST(Dispatcher, CompositeKernelsServeKeysWithoutTheirOwn) {
  auto& d = Dispatcher::instance();
  auto implicit = d.def("dtest::comp_i(Tensor self) -> Tensor", "test");
  const_cast<OperatorEntry*>(implicit)->set_kind(OperatorKind::CompositeImplicit);
  d.register_kernel("dtest::comp_i", TS_KEY_COMPOSITE_IMPLICIT, kernel(record, "implicit"));
  call_trace.clear();
  call1(implicit, zeros({2}));
  call1(implicit, tensor_with_keys(DispatchKey::AutogradCPU));  // Autograd: the decomposition, recorded
  EXPECT_EQ(call_trace, (std::vector<std::string>{"implicit", "implicit"}));
  d.register_kernel("dtest::comp_i", kCPU, kernel(record, "fused CPU"));
  call_trace.clear();
  call1(implicit, zeros({2}));
  EXPECT_EQ(call_trace, (std::vector<std::string>{"fused CPU"}));

  auto explicit_op = d.def("dtest::comp_e(Tensor self) -> Tensor", "test");
  const_cast<OperatorEntry*>(explicit_op)->set_kind(OperatorKind::CompositeExplicit);
  d.register_kernel("dtest::comp_e", TS_KEY_COMPOSITE_EXPLICIT, kernel(record, "explicit"));
  d.register_kernel("dtest::comp_e", int32_t(DispatchKey::AutogradCPU), kernel(record_and_redispatch, "formula"));
  call_trace.clear();
  call1(explicit_op, tensor_with_keys(DispatchKey::AutogradCPU));
  EXPECT_EQ(call_trace, (std::vector<std::string>{"formula", "explicit"}));
  // An explicit composite does not serve an Autograd key: without a formula, that key has no kernel.
  auto no_formula = d.def("dtest::comp_e2(Tensor self) -> Tensor", "test");
  d.register_kernel("dtest::comp_e2", TS_KEY_COMPOSITE_EXPLICIT, kernel(record, "explicit"));
  EXPECT_THROW(call1(no_formula, tensor_with_keys(DispatchKey::AutogradCPU)), NotImplementedError);

  std::string text = d.describe_text("dtest::comp_i");
  EXPECT_NE(text.find("kind: composite (implicit autograd)"), std::string::npos) << text;
  EXPECT_NE(text.find("CompositeImplicitAutograd"), std::string::npos) << text;
  // A second plugin's decomposition for the same operator is refused, naming both.
  EXPECT_THROW(d.register_kernel("dtest::comp_i", TS_KEY_COMPOSITE_IMPLICIT,
                                 KernelEntry{record, const_cast<char*>("x"), "other", false}),
               PluginError);
}

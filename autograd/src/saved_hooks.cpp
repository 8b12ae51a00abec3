#include "saved_hooks.h"

#include <vector>

namespace tessera::autograd {

struct SavedHooks {
  int64_t callback;
  explicit SavedHooks(int64_t id) : callback(id) {}
  ~SavedHooks() { sdk::host().release_callback(callback); }
};

namespace {

thread_local std::vector<std::shared_ptr<SavedHooks>> active;
thread_local bool packing = false;

enum Mode : int64_t { kPack = 0, kUnpack = 1, kRelease = 2 };

}  // namespace

PackedTensor::~PackedTensor() {
  // The frontend drops what it kept for the key. Never throws: a destructor (and at exit the
  // frontend may be gone, which its callback tolerates).
  ts_value values[2] = {sdk::value(int64_t(kRelease)), sdk::value(key)};
  ts_stack stack{sizeof(ts_stack), values, 2, 2};
  (void)sdk::host().invoke_callback(nullptr, hooks->callback, &stack);
}

std::shared_ptr<PackedTensor> pack_saved(const sdk::TensorRef& t) {
  if (active.empty() || packing || !t.defined()) return nullptr;
  std::shared_ptr<SavedHooks> hooks = active.back();
  ts_value values[2] = {sdk::value(int64_t(kPack)), sdk::value(t)};
  ts_stack stack{sizeof(ts_stack), values, 2, 2};
  packing = true;
  ts_status status = sdk::host().invoke_callback(sdk::current_call(), hooks->callback, &stack);
  packing = false;
  sdk::check_host(status);
  if (stack.size < 1 || values[0].tag != TS_VALUE_INT)
    throw sdk::Error(TS_ERROR, "saved_tensors_hooks: the frontend's pack callback returned no key");
  auto packed = std::make_shared<PackedTensor>();
  packed->hooks = std::move(hooks);
  packed->key = values[0].u.i;
  return packed;
}

sdk::TensorRef unpack_saved(const PackedTensor& packed) {
  ts_value values[2] = {sdk::value(int64_t(kUnpack)), sdk::value(packed.key)};
  ts_stack stack{sizeof(ts_stack), values, 2, 2};
  sdk::check_host(sdk::host().invoke_callback(sdk::current_call(), packed.hooks->callback, &stack));
  if (stack.size < 1 || values[0].tag != TS_VALUE_TENSOR || !values[0].u.tensor)
    throw sdk::Error(TS_ERROR, "saved_tensors_hooks: unpack_hook returned no tensor");
  return sdk::TensorRef::adopt(values[0].u.tensor);
}

void push_saved_hooks(int64_t callback) { active.push_back(std::make_shared<SavedHooks>(callback)); }

void pop_saved_hooks() {
  if (active.empty()) throw sdk::Error(TS_ERROR, "saved_tensors_hooks: no hook pair is active on this thread");
  active.pop_back();
}

}  // namespace tessera::autograd

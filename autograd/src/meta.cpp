#include "meta.h"

#include "forward_ad.h"

#include "node.h"
#include "view_inplace.h"

#include <atomic>

namespace tessera::autograd {
namespace {
constexpr ts_dispatch_key kAutogradCPU = 40, kAutogradCUDA = 41, kAutogradHIP = 42, kAutogradOther = 43;
std::atomic<bool> anomaly{false};
void destroy_meta(void* p) { delete static_cast<AutogradMeta*>(p); }
}  // namespace

AutogradMeta::~AutogradMeta() {
  for (int64_t id : hooks) sdk::host().release_callback(id);
  for (int64_t id : post_accumulate_hooks) sdk::host().release_callback(id);
}

AutogradMeta* meta_of(ts_tensor t) {
  auto* m = static_cast<AutogradMeta*>(sdk::host().tensor_get_slot(t, TS_SLOT_AUTOGRAD));
  if (m && m->is_view && m->base.defined()) refresh_view_history(t, *m);
  return m;
}

AutogradMeta& ensure_meta(ts_tensor t) {
  if (AutogradMeta* m = meta_of(t)) return *m;
  auto* m = new AutogradMeta;
  if (sdk::host().tensor_set_slot(t, TS_SLOT_AUTOGRAD, m, destroy_meta) != TS_OK) {
    delete m;
    throw sdk::Error(TS_ERROR, "autograd: cannot attach state to a tensor");
  }
  sdk::check_host(sdk::host().tensor_update_keys(t, ts_keyset(1) << autograd_key_of(t), 0));
  return *m;
}

ts_keyset all_autograd_keys() {
  return (ts_keyset(1) << kAutogradCPU) | (ts_keyset(1) << kAutogradCUDA) | (ts_keyset(1) << kAutogradHIP) |
         (ts_keyset(1) << kAutogradOther);
}

ts_dispatch_key autograd_key_of(ts_tensor t) {
  ts_keyset keys = sdk::host().tensor_keys(t) & ((ts_keyset(1) << TS_FIRST_TRANSFORM_KEY) - 1);
  if (keys & 1) return kAutogradCPU;
  if (keys & 2) return kAutogradCUDA;
  if (keys & 4) return kAutogradHIP;
  return kAutogradOther;
}

namespace {
// Grad mode off is normally the Autograd keys excluded on this thread (no kernel runs: inference
// costs nothing). While a dual level is open the kernels must still run to compute tangents, so
// grad mode off is this flag instead, and the kernels record no history (any_requires_grad).
thread_local bool grad_off_keys_kept = false;
}  // namespace

bool grad_recording_suppressed() { return grad_off_keys_kept; }

bool grad_mode_enabled() {
  if (grad_off_keys_kept) return false;
  ts_keyset included = 0, excluded = 0;
  sdk::host().tls_keys(&included, &excluded);
  return (excluded & all_autograd_keys()) == 0;
}

void set_grad_mode(bool enabled) {
  ts_keyset included = 0, excluded = 0;
  sdk::host().tls_keys(&included, &excluded);
  grad_off_keys_kept = !enabled && dual_level_open();
  excluded = enabled || grad_off_keys_kept ? (excluded & ~all_autograd_keys()) : (excluded | all_autograd_keys());
  // While a dual level is open every operator passes through the Autograd kernels, plain tensors'
  // too (any Autograd key will do: the kernels are the same): a view of a plain tensor must
  // remember its base, so an in-place write of a dual value into it reaches the base's tangent.
  const ts_keyset every_tensor = ts_keyset(1) << kAutogradCPU;
  included = dual_level_open() ? (included | every_tensor) : (included & ~every_tensor);
  sdk::host().set_tls_keys(included, excluded);
}

void refresh_grad_mode() { set_grad_mode(grad_mode_enabled()); }

bool anomaly_mode_enabled() { return anomaly.load(std::memory_order_relaxed); }
void set_anomaly_mode(bool enabled) { anomaly.store(enabled); }

}  // namespace tessera::autograd

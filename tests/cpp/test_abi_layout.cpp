// The C ABI's layout against the committed baseline (tests/abi/abi_baseline.txt): every field
// recorded there keeps its offset and size, structs only grow, enum codes never change. A
// failure here means a breaking change: append fields instead, or bump the major version.
#include <tessera/abi.h>

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

namespace {

struct Layout {
  size_t offset, size;
};

// What the current header says, for every field of every crossing struct.
std::map<std::string, Layout> current_layout() {
  std::map<std::string, Layout> m;
#define FIELD(S, F) m[#S "." #F] = {offsetof(S, F), sizeof(((S*)nullptr)->F)};
#define SIZE(S) m[#S] = {0, sizeof(S)};
#define CODE(C) m[#C] = {size_t(C), 0};
  SIZE(ts_device) FIELD(ts_device, type) FIELD(ts_device, index)
  SIZE(ts_tensor_view) FIELD(ts_tensor_view, struct_size) FIELD(ts_tensor_view, data) FIELD(ts_tensor_view, device)
  FIELD(ts_tensor_view, dtype) FIELD(ts_tensor_view, ndim) FIELD(ts_tensor_view, shape) FIELD(ts_tensor_view, strides)
  FIELD(ts_tensor_view, byte_offset) FIELD(ts_tensor_view, numel)
  SIZE(ts_value) FIELD(ts_value, tag) FIELD(ts_value, u)
  SIZE(ts_stack) FIELD(ts_stack, struct_size) FIELD(ts_stack, values) FIELD(ts_stack, size) FIELD(ts_stack, capacity)
  SIZE(ts_device_desc) FIELD(ts_device_desc, struct_size) FIELD(ts_device_desc, name)
  FIELD(ts_device_desc, host_accessible) FIELD(ts_device_desc, device_data) FIELD(ts_device_desc, device_count)
  FIELD(ts_device_desc, allocate) FIELD(ts_device_desc, deallocate) FIELD(ts_device_desc, copy_to_host)
  FIELD(ts_device_desc, copy_from_host) FIELD(ts_device_desc, copy_within) FIELD(ts_device_desc, synchronize)
  FIELD(ts_device_desc, stream_create) FIELD(ts_device_desc, stream_destroy) FIELD(ts_device_desc, set_current_stream)
  FIELD(ts_device_desc, stream_synchronize) FIELD(ts_device_desc, stream_query) FIELD(ts_device_desc, stream_wait_event)
  FIELD(ts_device_desc, event_create) FIELD(ts_device_desc, event_destroy) FIELD(ts_device_desc, event_record)
  FIELD(ts_device_desc, event_synchronize) FIELD(ts_device_desc, event_query) FIELD(ts_device_desc, event_elapsed_ms)
  FIELD(ts_device_desc, record_stream) FIELD(ts_device_desc, host_allocate) FIELD(ts_device_desc, host_deallocate)
  FIELD(ts_device_desc, copy_to_host_async) FIELD(ts_device_desc, copy_from_host_async)
  CODE(TS_EVENT_DEFAULT) CODE(TS_EVENT_TIMING)
  SIZE(ts_plugin_info) FIELD(ts_plugin_info, struct_size) FIELD(ts_plugin_info, name) FIELD(ts_plugin_info, version)
  FIELD(ts_plugin_info, abi_major) FIELD(ts_plugin_info, abi_minor) FIELD(ts_plugin_info, min_host_abi_minor)
  SIZE(ts_host_api) FIELD(ts_host_api, struct_size) FIELD(ts_host_api, abi_major) FIELD(ts_host_api, abi_minor)
  FIELD(ts_host_api, host_version) FIELD(ts_host_api, set_error) FIELD(ts_host_api, warn)
  FIELD(ts_host_api, def_operator) FIELD(ts_host_api, register_kernel) FIELD(ts_host_api, register_fallthrough)
  FIELD(ts_host_api, register_fallback) FIELD(ts_host_api, register_device) FIELD(ts_host_api, find_dispatch_key)
  FIELD(ts_host_api, find_operator) FIELD(ts_host_api, call_operator) FIELD(ts_host_api, redispatch)
  FIELD(ts_host_api, tensor_retain) FIELD(ts_host_api, tensor_release) FIELD(ts_host_api, tensor_get_view)
  FIELD(ts_host_api, tensor_empty) FIELD(ts_host_api, tensor_alias) FIELD(ts_host_api, tensor_storage_offset)
  FIELD(ts_host_api, tensor_resize) FIELD(ts_host_api, tensor_bump_version) FIELD(ts_host_api, next_random_seed)
  FIELD(ts_host_api, num_threads) FIELD(ts_host_api, default_float_dtype)
  FIELD(ts_host_api, tensor_get_slot) FIELD(ts_host_api, tensor_set_slot) FIELD(ts_host_api, tensor_keys)
  FIELD(ts_host_api, tensor_update_keys) FIELD(ts_host_api, tensor_version) FIELD(ts_host_api, tls_keys)
  FIELD(ts_host_api, set_tls_keys) FIELD(ts_host_api, invoke_callback) FIELD(ts_host_api, release_callback)
  FIELD(ts_host_api, call_operator_of) FIELD(ts_host_api, operator_name)
  FIELD(ts_host_api, current_stream) FIELD(ts_host_api, set_current_stream)
  CODE(TS_SLOT_AUTOGRAD) CODE(TS_SLOT_BATCHED) CODE(TS_SLOT_TRACER) CODE(TS_SLOT_SPARE) CODE(TS_FIRST_TRANSFORM_KEY) CODE(TS_KEY_CATCH_ALL)
  CODE(TS_OK) CODE(TS_ERROR) CODE(TS_ERROR_TYPE) CODE(TS_ERROR_VALUE) CODE(TS_ERROR_INDEX)
  CODE(TS_ERROR_NOT_IMPLEMENTED) CODE(TS_ERROR_OUT_OF_MEMORY) CODE(TS_ERROR_INCOMPATIBLE)
  CODE(TS_BOOL) CODE(TS_UINT8) CODE(TS_INT8) CODE(TS_INT16) CODE(TS_INT32) CODE(TS_INT64) CODE(TS_FLOAT16)
  CODE(TS_BFLOAT16) CODE(TS_FLOAT32) CODE(TS_FLOAT64)
  CODE(TS_VALUE_NONE) CODE(TS_VALUE_TENSOR) CODE(TS_VALUE_INT) CODE(TS_VALUE_DOUBLE) CODE(TS_VALUE_BOOL)
  CODE(TS_VALUE_INT_LIST) CODE(TS_VALUE_TENSOR_LIST) CODE(TS_VALUE_STRING) CODE(TS_VALUE_DTYPE)
  CODE(TS_VALUE_DEVICE) CODE(TS_VALUE_DOUBLE_LIST)
  // 1.7 and 1.8: process-group backends.
  SIZE(ts_collective) FIELD(ts_collective, struct_size) FIELD(ts_collective, kind) FIELD(ts_collective, reduce_op)
  FIELD(ts_collective, root) FIELD(ts_collective, tag) FIELD(ts_collective, inputs) FIELD(ts_collective, n_inputs)
  FIELD(ts_collective, outputs) FIELD(ts_collective, n_outputs) FIELD(ts_collective, input_splits)
  FIELD(ts_collective, output_splits) FIELD(ts_collective, timeout_ms)
  SIZE(ts_process_group_backend) FIELD(ts_process_group_backend, struct_size) FIELD(ts_process_group_backend, name)
  FIELD(ts_process_group_backend, device_types) FIELD(ts_process_group_backend, backend_data)
  FIELD(ts_process_group_backend, create) FIELD(ts_process_group_backend, destroy) FIELD(ts_process_group_backend, start)
  FIELD(ts_process_group_backend, work_wait) FIELD(ts_process_group_backend, work_is_completed)
  FIELD(ts_process_group_backend, work_release) FIELD(ts_process_group_backend, work_source_rank)
  FIELD(ts_host_api, register_process_group_backend) FIELD(ts_host_api, native_stream)
  FIELD(ts_host_api, tensor_use_count)
  CODE(TS_COLLECTIVE_ALL_REDUCE) CODE(TS_COLLECTIVE_BROADCAST) CODE(TS_COLLECTIVE_REDUCE) CODE(TS_COLLECTIVE_ALL_GATHER)
  CODE(TS_COLLECTIVE_GATHER) CODE(TS_COLLECTIVE_SCATTER) CODE(TS_COLLECTIVE_REDUCE_SCATTER)
  CODE(TS_COLLECTIVE_ALL_TO_ALL) CODE(TS_COLLECTIVE_BARRIER) CODE(TS_COLLECTIVE_SEND) CODE(TS_COLLECTIVE_RECV)
  CODE(TS_REDUCE_SUM) CODE(TS_REDUCE_PRODUCT) CODE(TS_REDUCE_MIN) CODE(TS_REDUCE_MAX)
#undef FIELD
#undef SIZE
#undef CODE
  return m;
}

}  // namespace

TEST(AbiLayout, MatchesCommittedBaseline) {
  std::ifstream in(TESSERA_ABI_BASELINE);
  ASSERT_TRUE(in) << "cannot read " << TESSERA_ABI_BASELINE;
  auto now = current_layout();
  std::string line;
  int checked = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string kind, name;
    size_t a = 0, b = 0;
    fields >> kind >> name >> a >> b;
    auto it = now.find(name);
    ASSERT_NE(it, now.end()) << name << " is in the baseline but gone from abi.h: a breaking change";
    if (kind == "field") {
      EXPECT_EQ(it->second.offset, a) << name << " moved: fields may only be appended";
      EXPECT_EQ(it->second.size, b) << name << " changed size";
    } else if (kind == "struct") {
      EXPECT_GE(it->second.size, b) << name << " shrank";
    } else if (kind == "code") {
      EXPECT_EQ(it->second.offset, a) << name << " was renumbered";
    }
    ++checked;
  }
  EXPECT_GT(checked, 60);
}

// Regenerates the baseline text (run with --gtest_also_run_disabled_tests after an additive change).
TEST(AbiLayout, DISABLED_PrintBaseline) {
  for (auto& [name, l] : current_layout()) {
    if (name.find('.') != std::string::npos) std::printf("field %s %zu %zu\n", name.c_str(), l.offset, l.size);
    else if (name.rfind("TS_", 0) == 0) std::printf("code %s %zu 0\n", name.c_str(), l.offset);
    else std::printf("struct %s 0 %zu\n", name.c_str(), l.size);
  }
}

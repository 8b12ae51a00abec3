// Bad input at every boundary: each class of mistake raises a typed error whose message names
// the operator and what was expected and received — never a crash or an abort.
#include "test_util.h"

#include <tessera/cpu_fallback.h>
#include <tessera/device_registry.h>
#include <tessera/schema.h>
#include <tessera/tessera.h>

#include <gtest/gtest.h>

#include <limits>

using namespace tessera;
using tessera::testing::expect_error;

namespace {
std::string fixture(const char* name) { return std::string(TESSERA_FIXTURE_DIR) + "/libtessera_" + name + ".so"; }
constexpr int64_t kBig = int64_t(1) << 40;
}  // namespace

TEST(BadInput, ShapeMismatches) {
  expect_error<ValueError>([] { add(ones({2, 3}), ones({4})); }, {"add", "broadcast", "[2, 3]", "[4]"});
  expect_error<ValueError>([] { mm(ones({2, 3}), ones({4, 5})); }, {"mm", "(3)", "(4)", "[2, 3]", "[4, 5]"});
  expect_error<ValueError>([] { matmul(ones({2, 3}), ones({4})); }, {"matmul", "(3)", "(4)"});
  expect_error<ValueError>([] { cat({ones({2, 3}), ones({3})}); }, {"cat", "2 dimensions", "got 1"});
  expect_error<ValueError>([] { cat({ones({2, 3}), ones({2, 4})}); }, {"cat", "expected size 3", "got size 4"});
  expect_error<ValueError>([] { view(ones({2, 3}), {4}); }, {"view", "[4]", "size 6"});
  expect_error<ValueError>([] { reshape(ones({2, 3}), {7}); }, {"reshape", "[7]", "size 6"});
}

TEST(BadInput, UnsupportedDtypes) {
  expect_error<TypeError>([] { relu(ones({3}, kBool)); }, {"relu", "numeric", "bool"});
  expect_error<TypeError>([] { matmul(ones({2, 2}, kBool), ones({2, 2}, kBool)); }, {"matmul", "numeric", "bool"});
  expect_error<TypeError>([] { mean(ones({3}, kInt64)); }, {"mean", "floating point", "int64"});
  expect_error<TypeError>([] { softmax(ones({3}, kInt64), 0); }, {"softmax", "floating point", "int64"});
}

TEST(BadInput, OutOfRangeIndicesAndDims) {
  Tensor x = ones({2, 3});
  Tensor bad_rows = tensor_from_values(std::vector<double>{0, 7}, {2}, kInt64);
  Tensor bad_cols = tensor_from_values(std::vector<double>{0, 9, 0, 0}, {2, 2}, kInt64);
  expect_error<IndexError>([&] { select(x, 0, 5); }, {"select", "index 5", "size 2"});
  expect_error<IndexError>([&] { select(x, 0, -3); }, {"select", "index -3", "size 2"});
  expect_error<IndexError>([&] { index_select(x, 0, bad_rows); }, {"index_select", "index 7", "size 2"});
  expect_error<IndexError>([&] { gather(x, 1, bad_cols); }, {"gather", "index 9", "size 3"});
  expect_error<IndexError>([&] { transpose(x, 0, 3); }, {"transpose", "dimension 3", "[-2, 1]"});
  expect_error<IndexError>([&] { sum(x, std::vector<int64_t>{5}); }, {"sum", "dimension 5", "[-2, 1]"});
}

TEST(BadInput, DeviceMismatches) {
  load_plugin(fixture("good"));
  Tensor on_dev = empty({3}, kFloat32, Device("testdev"));
  Tensor on_cpu = ones({3});
  set_cpu_fallback(false);  // otherwise the mixed call runs on CPU with copies
  expect_error<NotImplementedError>([&] { add(on_cpu, on_dev); }, {"add.Tensor", "testdev", "[CPU]"});
  expect_error<NotImplementedError>([&] { add(on_dev, on_cpu); }, {"add.Tensor", "testdev"});
  expect_error<NotImplementedError>([&] { mm(ones({3, 3}), empty({3, 3}, kFloat32, Device("testdev"))); },
                                    {"'mm'", "testdev"});
  reset_cpu_fallback();
  expect_error<ValueError>([] { empty({3}, kFloat32, Device("nosuchdev")); }, {"nosuchdev", "unknown device type"});
}

// C++ is typed, so wrong argument types reach the host through the boxed C ABI instead: a
// plugin handing call_operator a stack whose values have the wrong tags or count.
TEST(BadInput, WrongArgumentTypesThroughTheAbi) {
  const ts_host_api* api = host_api();
  init();
  Tensor x = ones({2});
  ts_operator op = api->find_operator("add.Tensor");
  ASSERT_NE(op, nullptr);
  auto call_with = [&](std::vector<ts_value> args) {
    std::vector<ts_value> slots = args;
    slots.resize(8);
    ts_stack stack{sizeof(ts_stack), slots.data(), int32_t(args.size()), int32_t(slots.size())};
    return api->call_operator(nullptr, op, &stack);
  };
  ts_value i{};
  i.tag = TS_VALUE_INT;
  i.u.i = 1;
  ts_value s{};
  s.tag = TS_VALUE_STRING;
  s.u.str = "a";
  EXPECT_NE(call_with({i, i, i}), TS_OK);  // no tensor at all
  EXPECT_NE(call_with({s, s, i}), TS_OK);
  EXPECT_NE(call_with({}), TS_OK);         // too few values
  EXPECT_EQ(api->find_operator("no_such_op"), nullptr);
}

TEST(BadInput, SizesThatOverflowInt64) {
  expect_error<ValueError>([] { empty({int64_t(1) << 62, 4}); }, {"empty", "number of elements", "overflows int64"});
  expect_error<ValueError>([] { zeros({kBig, kBig}); }, {"zeros", "overflows int64"});
  expect_error<ValueError>([] { empty({int64_t(1) << 61}, kFloat64); }, {"empty", "float64", "overflow the byte size"});
  expect_error<ValueError>([] { ones({std::numeric_limits<int64_t>::max(), 2}); }, {"ones", "overflows int64"});
}

TEST(BadInput, NegativeSizes) {
  expect_error<ValueError>([] { empty({-1}); }, {"empty", "non-negative", "[-1]"});
  expect_error<ValueError>([] { zeros({2, -3}); }, {"zeros", "non-negative", "[2, -3]"});
  expect_error<ValueError>([] { ones({std::numeric_limits<int64_t>::min()}); }, {"ones", "non-negative"});
}

// The CPU allocator returns NULL for a request larger than RAM + swap (no overcommit for that
// much), and the host turns it into OutOfMemoryError instead of aborting.
TEST(BadInput, TooLargeToAllocate) {
  expect_error<OutOfMemoryError>([] { empty({int64_t(1) << 45}); }, {"empty", "out of memory", "bytes on cpu"});
  expect_error<OutOfMemoryError>([] { zeros({int64_t(1) << 44}, kFloat64); }, {"zeros", "out of memory"});
  // The host is still usable afterwards.
  EXPECT_EQ(add(ones({2}), ones({2})).to_double_vector(), (std::vector<double>{2, 2}));
}

// Regressions found by fuzz/fuzz_schema: a scalar default on a huge fixed-size list used to be
// expanded in memory (500 GB for this one) and abort with bad_alloc.
TEST(BadInput, FuzzRegressionHugeFixedListDefault) {
  expect_error<SchemaError>([] { parse_schema("g.o(float[66666666661] xs=6) -> Tensor"); },
                            {"at most 4096", "66666666661"});
  EXPECT_EQ(parse_schema("g(int[4096] xs=1) -> Tensor").arguments[0].default_value->ints.size(), 4096u);
}

// Found while writing fuzz/fuzz_handshake (reading the staging code): a device description missing a required slot, or
// registered twice by one plugin, was only refused at commit, after part of the plugin was in.
TEST(BadInput, RefusedDeviceRegistrationLeavesNothing) {
  static auto init_fn = [](const ts_host_api* host, ts_registrar reg, ts_plugin_info* info) -> ts_status {
    info->name = "half_device";
    info->version = "0";
    info->abi_major = TESSERA_ABI_MAJOR;
    info->abi_minor = TESSERA_ABI_MINOR;
    ts_device_desc desc{};
    desc.struct_size = sizeof desc;
    desc.name = "halfdev";  // no allocate, no copies
    ts_dispatch_key key = -1;
    if (host->register_device(reg, &desc, &key) != TS_OK) return TS_ERROR;
    return TS_OK;
  };
  size_t before = loaded_plugins().size();
  expect_error<PluginError>([] { load_plugin_from_entry(+init_fn, "<test>/half_device"); },
                            {"half_device", "halfdev", "allocate"});
  EXPECT_EQ(loaded_plugins().size(), before);
  EXPECT_EQ(DeviceRegistry::instance().find("halfdev"), nullptr);
  // NULL out-pointers are refused, not written through.
  EXPECT_NE(host_api()->find_dispatch_key("CPU", nullptr), TS_OK);
}

// Found by helper F: an index past the device type's count was accepted ("cpu:5" made a tensor).
// Now refused when parsed (like torch.device("cpu:1")) and, for a Device made from numbers,
// where memory is allocated.
TEST(BadInput, DeviceIndexPastTheDeviceCount) {
  expect_error<ValueError>([] { Device("cpu:1"); }, {"'cpu:1'", "device index 1 is out of range", "has 1 device"});
  load_plugin(fixture("good"));
  EXPECT_EQ(empty({2}, kFloat32, Device("testdev:1")).device(), Device("testdev:1"));
  expect_error<ValueError>([] { Device("testdev:2"); }, {"device index 2 is out of range", "plugin 'good'", "0..1"});
  Device bad(Device("testdev").type(), 5);
  expect_error<ValueError>([&] { empty({2}, kFloat32, bad); }, {"empty", "device index 5 is out of range", "'testdev'"});
  expect_error<ValueError>([&] { to_device(ones({2}), bad); }, {"device index 5 is out of range"});
}

// A zero anywhere makes numel 0: [2**62, 2, 0] used to be refused as overflowing int64 while
// [0, 2**62, 4] was accepted.
TEST(BadInput, ZeroSizeWithHugeDimensions) {
  for (std::vector<int64_t> shape : {std::vector<int64_t>{int64_t(1) << 62, 2, 0}, {0, int64_t(1) << 62, 4}}) {
    Tensor t = zeros(shape);
    EXPECT_EQ(t.shape(), shape);
    EXPECT_EQ(t.numel(), 0);
  }
  expect_error<OutOfMemoryError>([] { empty({kBig}); }, {"empty", "out of memory", "4398046511104 bytes on cpu"});
}

// libtessera_gloo.so: the "gloo" process-group backend (ABI 1.7) for CPU tensors, on Gloo's TCP
// transport. The host hands it a store to meet the other ranks and starts collectives on it.
#include "gloo_group.h"
#include "store_adapter.h"

#include <tessera/sdk/collective_names.h>
#include <tessera/sdk/plugin.h>

#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

namespace tessera::gloo_backend {
namespace {

struct GroupHandle {
  std::shared_ptr<Group> group;
};
struct WorkHandle {
  std::shared_ptr<Work> work;
};

void report(const std::string& message) { sdk::host().set_error(nullptr, message.c_str()); }

// The address this host reaches `peer` from (a connected UDP socket sends nothing): the
// interface the other ranks can reach us on, also across network namespaces.
std::string local_address_toward(const std::string& peer) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(peer.c_str(), "9", &hints, &found) != 0 || !found) return {};
  std::string address;
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
    sockaddr_in local{};
    socklen_t length = sizeof local;
    char text[INET_ADDRSTRLEN] = {};
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0 &&
        inet_ntop(AF_INET, &local.sin_addr, text, sizeof text))
      address = text;
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(found);
  return address;
}

// GLOO_SOCKET_IFNAME names the interface (as in PyTorch); otherwise the address that routes to
// MASTER_ADDR; otherwise loopback.
::gloo::transport::tcp::attr device_attributes() {
  ::gloo::transport::tcp::attr attr;
  if (const char* iface = std::getenv("GLOO_SOCKET_IFNAME"); iface && *iface) {
    attr.iface = iface;
    return attr;
  }
  const char* master = std::getenv("MASTER_ADDR");
  std::string address = master && *master ? local_address_toward(master) : "";
  attr.hostname = address.empty() ? "127.0.0.1" : address;
  return attr;
}

// The ranks whose address is not in the store yet (gloo's full mesh keys each rank by its number).
std::string missing_ranks(const ts_store& store, int size) {
  std::string missing;
  auto ignore = [](void*, const void*, size_t) {};
  for (int r = 0; r < size; ++r) {
    std::string key = "gloo/" + std::to_string(r);
    if (store.get(store.data, key.c_str(), 1, ignore, nullptr) != TS_OK)
      missing += (missing.empty() ? "" : ", ") + std::to_string(r);
  }
  return missing;
}

ts_status create(void*, const ts_store* store, int32_t rank, int32_t size, int64_t timeout_ms, ts_process_group* out) {
  if (!store || !out || size < 1 || rank < 0 || rank >= size) {
    report(sdk::cat("gloo: cannot create a group with rank ", rank, " and size ", size));
    return TS_ERROR_VALUE;
  }
  const std::chrono::milliseconds timeout(timeout_ms > 0 ? timeout_ms : 1800000);
  try {
    auto device = ::gloo::transport::tcp::CreateDevice(device_attributes());
    auto context = std::make_shared<::gloo::rendezvous::Context>(rank, size);
    context->setTimeout(timeout);
    StoreAdapter adapter(*store, "gloo/", timeout);
    context->connectFullMesh(adapter, device);
    *out = reinterpret_cast<ts_process_group>(new GroupHandle{std::make_shared<Group>(context, rank, size)});
    return TS_OK;
  } catch (const StoreAdapter::Failed& e) {
    // A wait that timed out: name the ranks that never came. Otherwise the store's message stands.
    std::string missing = missing_ranks(*store, size);
    if (missing.empty()) return e.status;
    report(sdk::cat("gloo: rank ", rank, " of ", size, " timed out after ", timeout.count(),
                    " ms waiting for its peers; ranks that never registered: ", missing));
    return TS_ERROR;
  } catch (const std::exception& e) {
    std::string missing = missing_ranks(*store, size);
    report(sdk::cat("gloo: rank ", rank, " of ", size, " could not connect to its peers within ", timeout.count(),
                    " ms", missing.empty() ? std::string() : sdk::cat(" (ranks that never registered: ", missing, ")"),
                    ": ", e.what()));
    return TS_ERROR;
  }
}

void destroy(void*, ts_process_group group) {
  auto* handle = reinterpret_cast<GroupHandle*>(group);
  if (!handle) return;
  handle->group->shut_down();
  delete handle;
}

ts_status start(void*, ts_process_group group, const ts_collective* collective, ts_work* out) {
  try {
    auto* handle = reinterpret_cast<GroupHandle*>(group);
    if (!handle || !collective || !out) throw std::invalid_argument("null group, collective or work pointer");
    *out = reinterpret_cast<ts_work>(new WorkHandle{handle->group->start(*collective)});
    return TS_OK;
  } catch (const std::invalid_argument& e) {
    report(sdk::cat("gloo: ", e.what()));
    return TS_ERROR_VALUE;
  } catch (const std::exception& e) {
    report(sdk::cat("gloo: ", collective ? sdk::collective_name(collective->kind) : "collective", ": ", e.what()));
    return TS_ERROR;
  }
}

ts_status work_wait(void*, ts_work work, int64_t timeout_ms) {
  auto* handle = reinterpret_cast<WorkHandle*>(work);
  if (!handle) return TS_ERROR_VALUE;
  // Gloo's own timeout ends a stuck collective; waiting a little longer lets its message win.
  auto limit = timeout_ms >= 0 ? std::chrono::milliseconds(timeout_ms) : handle->work->timeout + std::chrono::seconds(5);
  std::string message;
  ts_status status = handle->work->wait(limit, &message);
  if (status != TS_OK) report(message);
  return status;
}

int32_t work_is_completed(void*, ts_work work) {
  auto* handle = reinterpret_cast<WorkHandle*>(work);
  return handle && handle->work->is_finished() ? 1 : 0;
}

void work_release(void*, ts_work work) { delete reinterpret_cast<WorkHandle*>(work); }

int32_t work_source_rank(void*, ts_work work) {
  auto* handle = reinterpret_cast<WorkHandle*>(work);
  return handle && handle->work->is_finished() ? handle->work->source_rank.load() : -1;
}

void register_gloo(sdk::Registrar& reg) {
  ts_process_group_backend desc{};
  desc.struct_size = sizeof desc;
  desc.name = "gloo";
  desc.device_types = "cpu";
  desc.create = create;
  desc.destroy = destroy;
  desc.start = start;
  desc.work_wait = work_wait;
  desc.work_is_completed = work_is_completed;
  desc.work_release = work_release;
  desc.work_source_rank = work_source_rank;  // 1.8; a 1.7 host reads the description without it
  reg.process_group_backend(desc);
}

}  // namespace
}  // namespace tessera::gloo_backend

// Needs host ABI 1.7 (process-group backends).
TESSERA_PLUGIN("gloo", "0.1.0", 7, tessera::gloo_backend::register_gloo)

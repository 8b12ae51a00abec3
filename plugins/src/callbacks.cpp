// The host's table of frontend callbacks. Ids are never reused, so a stale id fails cleanly.
#include <tessera/callbacks.h>
#include <tessera/error.h>

#include <memory>
#include <mutex>
#include <unordered_map>

namespace tessera {
namespace {

struct Entry {
  std::shared_ptr<Callback> fn;  // shared: a callback may release itself while it runs
  int64_t holders = 1;
};

struct Table {
  std::mutex mutex;
  std::unordered_map<int64_t, Entry> entries;
  int64_t next_id = 1;
};

Table& table() {
  static Table* t = new Table;  // never destroyed: plugins may release ids during exit
  return *t;
}

}  // namespace

int64_t register_callback(Callback fn) {
  Table& t = table();
  std::lock_guard lock(t.mutex);
  int64_t id = t.next_id++;
  t.entries.emplace(id, Entry{std::make_shared<Callback>(std::move(fn)), 1});
  return id;
}

void retain_callback(int64_t id) {
  Table& t = table();
  std::lock_guard lock(t.mutex);
  auto it = t.entries.find(id);
  if (it == t.entries.end()) raise<ValueError>("retain_callback: no callback with id {}", id);
  ++it->second.holders;
}

void release_callback(int64_t id) {
  std::shared_ptr<Callback> doomed;  // destroyed outside the lock (it may hold Python objects)
  Table& t = table();
  {
    std::lock_guard lock(t.mutex);
    auto it = t.entries.find(id);
    if (it == t.entries.end()) return;
    if (--it->second.holders > 0) return;
    doomed = std::move(it->second.fn);
    t.entries.erase(it);
  }
}

void invoke_callback(int64_t id, ts_stack* stack) {
  std::shared_ptr<Callback> fn;
  {
    Table& t = table();
    std::lock_guard lock(t.mutex);
    auto it = t.entries.find(id);
    if (it == t.entries.end()) raise<ValueError>("invoke_callback: no callback with id {} (released already?)", id);
    fn = it->second.fn;
  }
  (*fn)(stack);
}

int64_t live_callbacks() {
  Table& t = table();
  std::lock_guard lock(t.mutex);
  return int64_t(t.entries.size());
}

}  // namespace tessera

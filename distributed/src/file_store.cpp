// FileStore: the store as a log of records in one file that processes share, guarded by flock.
// A record is  u8 kind (1 set, 2 delete) | u32 key length | key | u32 value length | value.
// A writer that died mid-record leaves a torn tail: readers ignore it and the next writer cuts it off.
#include <tessera/distributed/store.h>

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

namespace tessera::distributed {
namespace {

using Clock = std::chrono::steady_clock;
const char* kFinishedKey = "__tessera_filestore/finished";

class FileStore : public Store {
 public:
  FileStore(std::string path, int64_t world_size) : path_(std::move(path)), world_size_(world_size) {
    fd_ = open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw DistStoreError(fmt::format("FileStore: cannot open '{}': {}", path_, std::strerror(errno)));
  }
  // The last of world_size stores to finish removes the file (torch's FileStore does the same).
  ~FileStore() override {
    try {
      if (world_size_ > 0 && add(kFinishedKey, 1) >= world_size_) unlink(path_.c_str());
    } catch (...) {
    }
    close(fd_);
  }

  void set(const std::string& key, const Bytes& value) override {
    Locked lock(*this, LOCK_EX);
    append(1, key, value);
  }
  using Store::get;
  Bytes get(const std::string& key, Milliseconds timeout) override {
    wait({key}, timeout);
    Locked lock(*this, LOCK_SH);
    auto it = values_.find(key);
    if (it == values_.end()) throw DistStoreError(fmt::format("FileStore get: key '{}' was deleted while it was read", key));
    return it->second;
  }
  int64_t add(const std::string& key, int64_t delta) override {
    Locked lock(*this, LOCK_EX);
    auto it = values_.find(key);
    int64_t current = 0;
    if (it != values_.end()) {
      try {
        current = std::stoll(std::string(it->second.begin(), it->second.end()));
      } catch (...) {
        throw DistStoreError(fmt::format("FileStore add: the value at '{}' is not an integer", key));
      }
    }
    std::string text = std::to_string(current + delta);
    append(1, key, Bytes(text.begin(), text.end()));
    return current + delta;
  }
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    Locked lock(*this, LOCK_EX);
    auto it = values_.find(key);
    if (it == values_.end()) {
      if (!expected.empty()) return expected;
      append(1, key, desired);
      return desired;
    }
    if (it->second == expected) append(1, key, desired);
    return values_[key];
  }
  bool check(const std::vector<std::string>& keys) override {
    Locked lock(*this, LOCK_SH);
    for (auto& k : keys)
      if (!values_.count(k)) return false;
    return true;
  }
  using Store::wait;
  void wait(const std::vector<std::string>& keys, Milliseconds timeout) override {
    const auto deadline = Clock::now() + timeout;
    while (!check(keys)) {
      if (Clock::now() >= deadline) raise_wait_timeout("FileStore", keys, timeout);
      std::this_thread::sleep_for(Milliseconds(5));
    }
  }
  bool delete_key(const std::string& key) override {
    Locked lock(*this, LOCK_EX);
    if (!values_.count(key)) return false;
    append(2, key, {});
    return true;
  }
  int64_t num_keys() override {
    Locked lock(*this, LOCK_SH);
    return int64_t(values_.size());
  }

 private:
  // Holds the file lock and brings values_ up to date with what others appended.
  struct Locked {
    FileStore& s;
    std::unique_lock<std::mutex> thread_lock;
    Locked(FileStore& store, int mode) : s(store), thread_lock(store.mutex_) {
      while (flock(s.fd_, mode) != 0)
        if (errno != EINTR) throw DistStoreError(fmt::format("FileStore: cannot lock '{}': {}", s.path_, std::strerror(errno)));
      s.catch_up();
    }
    ~Locked() { flock(s.fd_, LOCK_UN); }
  };

  void catch_up() {
    struct stat st{};
    if (fstat(fd_, &st) != 0) throw DistStoreError(fmt::format("FileStore: cannot stat '{}': {}", path_, std::strerror(errno)));
    if (st.st_size < int64_t(read_to_)) {  // the file was replaced or cut: read it again
      values_.clear();
      read_to_ = 0;
    }
    if (st.st_size == int64_t(read_to_)) return;
    std::vector<uint8_t> tail(size_t(st.st_size) - read_to_);
    ssize_t got = pread(fd_, tail.data(), tail.size(), off_t(read_to_));
    if (got < 0) throw DistStoreError(fmt::format("FileStore: cannot read '{}': {}", path_, std::strerror(errno)));
    size_t at = 0, n = size_t(got);
    auto u32 = [&](size_t p) { uint32_t v; std::memcpy(&v, tail.data() + p, 4); return v; };
    for (;;) {
      if (at + 5 > n) break;
      const uint8_t kind = tail[at];
      const uint32_t key_length = u32(at + 1);
      if (at + 5 + key_length + 4 > n) break;
      const uint32_t value_length = u32(at + 5 + key_length);
      if (at + 9 + key_length + value_length > n) break;
      if (kind != 1 && kind != 2) break;  // not a record: treat like a torn tail
      std::string key(reinterpret_cast<char*>(tail.data() + at + 5), key_length);
      if (kind == 1) values_[key] = Bytes(tail.begin() + ptrdiff_t(at + 9 + key_length),
                                          tail.begin() + ptrdiff_t(at + 9 + key_length + value_length));
      else values_.erase(key);
      at += 9 + key_length + value_length;
    }
    read_to_ += at;
  }

  // Caller holds LOCK_EX and has caught up, so read_to_ ends the last whole record.
  void append(uint8_t kind, const std::string& key, const Bytes& value) {
    if (ftruncate(fd_, off_t(read_to_)) != 0)  // drop a torn tail left by a writer that died
      throw DistStoreError(fmt::format("FileStore: cannot truncate '{}': {}", path_, std::strerror(errno)));
    std::vector<uint8_t> record;
    auto put32 = [&](uint32_t v) { uint8_t b[4]; std::memcpy(b, &v, 4); record.insert(record.end(), b, b + 4); };
    record.push_back(kind);
    put32(uint32_t(key.size()));
    record.insert(record.end(), key.begin(), key.end());
    put32(uint32_t(value.size()));
    record.insert(record.end(), value.begin(), value.end());
    size_t written = 0;
    while (written < record.size()) {
      ssize_t n = pwrite(fd_, record.data() + written, record.size() - written, off_t(read_to_ + written));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw DistStoreError(fmt::format("FileStore: cannot write '{}': {}", path_, std::strerror(errno)));
      written += size_t(n);
    }
    read_to_ += record.size();
    if (kind == 1) values_[key] = value;
    else values_.erase(key);
  }

  std::string path_;
  int64_t world_size_;
  int fd_ = -1;
  std::mutex mutex_;
  std::map<std::string, Bytes> values_;
  size_t read_to_ = 0;
};

}  // namespace

std::shared_ptr<Store> make_file_store(const std::string& path, int64_t world_size) {
  return std::make_shared<FileStore>(path, world_size);
}

}  // namespace tessera::distributed

#include "tcp_store_table.h"

#include <fmt/format.h>

namespace tessera::distributed::server {
namespace {
bool parse_decimal(const std::string& s, int64_t* v) {
  try {
    size_t used = 0;
    *v = std::stoll(s, &used);
    return used == s.size();
  } catch (...) {
    return false;
  }
}
}  // namespace

void Table::handle(Client& client, const protocol::Message& m) {
  using namespace protocol;
  auto reply = [&](uint8_t status, std::vector<std::string> results = {}) {
    auto bytes = encode_message(status, results);
    client.out.insert(client.out.end(), bytes.begin(), bytes.end());
  };
  switch (m.code) {
    case kSet:
      values_[m.arguments[0]] = m.arguments[1];
      reply(kOk);
      break;
    case kGet: {
      auto it = values_.find(m.arguments[0]);
      if (it == values_.end()) reply(kNotFound);
      else reply(kOk, {it->second});
      break;
    }
    case kAdd: {
      int64_t delta = 0, current = 0;
      decode_int(m.arguments[1], &delta);
      auto it = values_.find(m.arguments[0]);
      if (it != values_.end() && !parse_decimal(it->second, &current)) {
        reply(kError, {fmt::format("add: the value at '{}' is not an integer", m.arguments[0])});
        break;
      }
      // Wraps like torch's int64 counters rather than overflowing into undefined behaviour.
      current = int64_t(uint64_t(current) + uint64_t(delta));
      values_[m.arguments[0]] = std::to_string(current);  // torch keeps counters as decimal text
      reply(kOk, {encode_int(current)});
      break;
    }
    case kCompareSet: {
      auto it = values_.find(m.arguments[0]);
      if (it == values_.end()) {
        if (m.arguments[1].empty()) {
          values_[m.arguments[0]] = m.arguments[2];
          reply(kOk, {m.arguments[2]});
        } else {
          reply(kOk, {m.arguments[1]});  // torch answers the expected value when the key is absent
        }
      } else {
        if (it->second == m.arguments[1]) it->second = m.arguments[2];
        reply(kOk, {it->second});
      }
      break;
    }
    case kCheck:
      reply(all_present(m.arguments) ? kOk : kNotFound);
      break;
    case kWait:
      if (all_present(m.arguments)) reply(kOk);
      else waiters_.push_back({&client, m.arguments});
      break;
    case kDelete:
      reply(values_.erase(m.arguments[0]) ? kOk : kNotFound);
      break;
    case kNumKeys:
      reply(kOk, {encode_int(int64_t(values_.size()))});
      break;
    case kPing:
      reply(kOk);
      break;
  }
  if (m.code == kSet || m.code == kAdd || m.code == kCompareSet) release_waiters();
}

void Table::receive(Client& c) {
  size_t at = 0;
  for (;;) {
    protocol::Message m;
    size_t used = 0;
    std::string why;
    auto parsed = protocol::parse_message(c.in.data() + at, c.in.size() - at, &m, &used, &why);
    if (parsed == protocol::Parse::kIncomplete) break;
    if (parsed == protocol::Parse::kMalformed || !protocol::valid_request(m, &why)) {
      c.closing = true;
      break;
    }
    at += used;
    handle(c, m);
  }
  c.in.erase(c.in.begin(), c.in.begin() + ptrdiff_t(at));
}

void Table::forget(Client* client) {
  waiters_.remove_if([&](const Waiter& w) { return w.client == client; });
}

bool Table::all_present(const std::vector<std::string>& keys) const {
  for (auto& k : keys)
    if (!values_.count(k)) return false;
  return true;
}

void Table::release_waiters() {
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (all_present(it->keys)) {
      auto bytes = protocol::encode_message(protocol::kOk, {});
      it->client->out.insert(it->client->out.end(), bytes.begin(), bytes.end());
      it = waiters_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace tessera::distributed::server

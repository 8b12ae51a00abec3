#include <tessera/device_registry.h>
#include <tessera/error.h>
#include <tessera/storage.h>

#include <cstring>

namespace tessera {

StorageImpl::StorageImpl(Device device, size_t nbytes)
    : nbytes_(nbytes), device_(device), device_type_(&DeviceRegistry::instance().require(device.type())) {
  // Every allocation comes through here: an index past the plugin's device count (a Device made
  // from numbers, or over the ABI) is refused before the plugin's allocator sees it.
  check_device_index(*device_type_, device.index());
  data_ = device_type_->desc.allocate(device_type_->desc.device_data, device.index(), nbytes);
  if (!data_ && nbytes > 0)
    raise<OutOfMemoryError>("out of memory: failed to allocate {} bytes on {} (plugin '{}')", nbytes,
                            device.str(), device_type_->plugin);
}

StorageImpl::StorageImpl(Device device, void* data, size_t nbytes, std::function<void()> release)
    : data_(data),
      nbytes_(nbytes),
      device_(device),
      device_type_(&DeviceRegistry::instance().require(device.type())),
      external_release_(release ? std::move(release) : [] {}) {}

void StorageImpl::move_to(void* data, std::function<void()> release) {
  if (!device_type_->desc.host_accessible)
    raise<RuntimeError>("Storage.move_to: the storage is on {}, whose memory the host cannot address", device_.str());
  if (nbytes_) std::memcpy(data, data_, nbytes_);
  if (external_release_) external_release_();
  else if (data_) device_type_->desc.deallocate(device_type_->desc.device_data, device_.index(), data_, nbytes_);
  data_ = data;
  external_release_ = release ? std::move(release) : [] {};
  pinned_by_ = -1;
}

StorageImpl::~StorageImpl() {
  if (external_release_) {
    external_release_();
    return;
  }
  if (data_) device_type_->desc.deallocate(device_type_->desc.device_data, device_.index(), data_, nbytes_);
}

}  // namespace tessera

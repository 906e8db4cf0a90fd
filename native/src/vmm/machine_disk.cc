// Machine: the copied disks' side of a live migration (DiskConfig::copy_on_migrate). The migration session reads
// the disk files itself; the machine only names them and owns their dirty-block maps, which the virtio-blk workers
// mark (devices/virtio/blk_dirty.h). Pause() quiesces the workers, so a take after it is the final one.
#include "vmm/machine.h"
#include "vmm/machine_impl.h"

namespace kvmts::vmm {

std::vector<CopiedDisk> Machine::CopiedDisks() const {
  std::vector<CopiedDisk> out;
  for (size_t i = 0; i < impl_->config.disks.size(); ++i) {
    if (!impl_->config.disks[i].copy_on_migrate) continue;
    auto overlay = i < impl_->blocks.size() ? impl_->blocks[i]->overlay_map() : nullptr;
    out.push_back({static_cast<uint32_t>(i), impl_->config.disks[i].path, overlay});
  }
  return out;
}

void Machine::StartDiskDirtyLog() {
  for (size_t i = 0; i < impl_->blocks.size() && i < impl_->config.disks.size(); ++i) {
    if (impl_->config.disks[i].copy_on_migrate) impl_->blocks[i]->dirty_map().Start();
  }
}

void Machine::StopDiskDirtyLog() {
  for (auto& b : impl_->blocks) b->dirty_map().Stop();
}

std::vector<uint64_t> Machine::TakeDiskDirty(uint32_t index) {
  if (index >= impl_->blocks.size() || !impl_->config.disks[index].copy_on_migrate) return {};
  return impl_->blocks[index]->dirty_map().TakeAndClear();
}

}  // namespace kvmts::vmm

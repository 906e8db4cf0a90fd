#include "devices/serial_16550.h"

namespace kvmts::devices {

void Serial16550::Read(uint16_t offset, uint8_t* data, size_t len) {
  for (size_t i = 0; i < len; ++i) data[i] = i == 0 && offset < 8 ? ReadReg(offset) : 0;
}

void Serial16550::Write(uint16_t offset, const uint8_t* data, size_t len) {
  if (len >= 1 && offset < 8) WriteReg(offset, data[0]);
}

uint8_t Serial16550::ReadReg(uint16_t offset) {
  switch (offset) {
    case kDataOffset: {
      if (lcr_ & kLcrDlabBit) return dll_;
      if (rx_.empty()) return 0;
      uint8_t b = rx_.front();
      rx_.pop_front();
      Refill();
      if (rx_.empty()) lsr_ &= static_cast<uint8_t>(~kLsrDrBit);
      return b;
    }
    case kIerOffset:
      return (lcr_ & kLcrDlabBit) ? dlm_ : ier_;
    case kIirOffset: {
      uint8_t iir = kIirNoneBit;
      if ((ier_ & kIerRdaBit) && !rx_.empty()) {
        iir = kIirRdaBit;
      } else if ((ier_ & kIerThreBit) && thre_pending_) {
        iir = kIirThreBit;
        thre_pending_ = false;  // reading IIR acknowledges THR-empty
      }
      if (fcr_ & 0x01) iir |= kIirFifoBits;
      return iir;
    }
    case kLcrOffset:
      return lcr_;
    case kMcrOffset:
      return mcr_;
    case kLsrOffset: {
      uint8_t v = lsr_;
      lsr_ &= static_cast<uint8_t>(~kLsrOverrunBit);
      return v;
    }
    case kMsrOffset:
      if (mcr_ & kMcrLoopBit) {
        // Loopback: DTR->DSR, RTS->CTS, OUT1->RI, OUT2->DCD.
        return static_cast<uint8_t>(((mcr_ & 0x01) << 5) | ((mcr_ & 0x02) << 3) | ((mcr_ & 0x04) << 4) |
                                    ((mcr_ & 0x08) << 4));
      }
      return msr_;
    case kScrOffset:
      return scr_;
    default:
      return 0;
  }
}

void Serial16550::WriteReg(uint16_t offset, uint8_t value) {
  switch (offset) {
    case kDataOffset:
      if (lcr_ & kLcrDlabBit) {
        dll_ = value;
        return;
      }
      if (mcr_ & kMcrLoopBit) {
        Enqueue(&value, 1);
      } else {
        events_.bytes_out++;
        out_->Write(value);
      }
      thre_pending_ = true;
      if (ier_ & kIerThreBit) irq_->Trigger();
      return;
    case kIerOffset:
      if (lcr_ & kLcrDlabBit) {
        dlm_ = value;
        return;
      }
      {
        bool thre_newly = !(ier_ & kIerThreBit) && (value & kIerThreBit);
        ier_ = value & 0x0f;
        if (thre_newly) {
          thre_pending_ = true;  // the transmitter is always empty: enabling THRE interrupts raises one at once
          irq_->Trigger();
        } else if ((ier_ & kIerRdaBit) && !rx_.empty()) {
          irq_->Trigger();
        }
      }
      return;
    case kIirOffset:  // FCR
      fcr_ = value & 0xc9;
      if (value & 0x02) {
        // The guest resets its receive FIFO; input the host still holds arrives after that.
        rx_.clear();
        Refill();
        if (rx_.empty()) lsr_ &= static_cast<uint8_t>(~kLsrDrBit);
      }
      return;
    case kLcrOffset:
      lcr_ = value;
      return;
    case kMcrOffset:
      mcr_ = value & 0x1f;
      return;
    case kScrOffset:
      scr_ = value;
      return;
    default:
      return;  // LSR and MSR are read-only
  }
}

size_t Serial16550::Enqueue(const uint8_t* data, size_t len) {
  size_t n = 0;
  for (; n < len && backlog_.empty() && rx_.size() < kRxFifoBytes; ++n) rx_.push_back(data[n]);
  for (; n < len && backlog_.size() < kRxBacklogBytes; ++n) backlog_.push_back(data[n]);
  if (n < len) {
    events_.rx_dropped += len - n;
    lsr_ |= kLsrOverrunBit;
  }
  events_.bytes_in += n;
  if (!rx_.empty()) {
    lsr_ |= kLsrDrBit;
    if (ier_ & kIerRdaBit) irq_->Trigger();
  }
  return n;
}

void Serial16550::Refill() {
  while (!backlog_.empty() && rx_.size() < kRxFifoBytes) {
    rx_.push_back(backlog_.front());
    backlog_.pop_front();
  }
  if (!rx_.empty()) lsr_ |= kLsrDrBit;
}

bool Serial16550::InterruptPending() const {
  return ((ier_ & kIerRdaBit) && !rx_.empty()) || ((ier_ & kIerThreBit) && thre_pending_);
}

std::vector<uint8_t> Serial16550::Save() const {
  const uint8_t version = backlog_.empty() ? 1 : 2;
  std::vector<uint8_t> out{version, ier_, lcr_, mcr_, lsr_, msr_, scr_, dll_, dlm_, fcr_,
                           static_cast<uint8_t>(thre_pending_), static_cast<uint8_t>(rx_.size())};
  out.reserve(out.size() + rx_.size() + (version == 2 ? 4 + backlog_.size() : 0));
  for (uint8_t b : rx_) out.push_back(b);
  if (version == 2) {
    const auto n = static_cast<uint32_t>(backlog_.size());
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
    for (uint8_t b : backlog_) out.push_back(b);
  }
  return out;
}

bool Serial16550::Restore(const uint8_t* data, size_t len) {
  if (len < 12 || (data[0] != 1 && data[0] != 2) || data[11] > kRxFifoBytes) return false;
  const size_t fifo_end = 12u + data[11];
  size_t backlog_len = 0;
  if (data[0] == 1) {
    if (len != fifo_end) return false;
  } else {
    if (len < fifo_end + 4) return false;
    for (int i = 0; i < 4; ++i) backlog_len |= static_cast<size_t>(data[fifo_end + i]) << (8 * i);
    if (backlog_len == 0 || backlog_len > kRxBacklogBytes || len != fifo_end + 4 + backlog_len) return false;
  }
  ier_ = data[1];
  lcr_ = data[2];
  mcr_ = data[3];
  lsr_ = data[4];
  msr_ = data[5];
  scr_ = data[6];
  dll_ = data[7];
  dlm_ = data[8];
  fcr_ = data[9];
  thre_pending_ = data[10] != 0;
  rx_.assign(data + 12, data + fifo_end);
  backlog_.assign(data + len - backlog_len, data + len);
  return true;
}

}  // namespace kvmts::devices

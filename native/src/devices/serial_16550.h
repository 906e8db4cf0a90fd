// Serial16550: the 16550A UART's register model (vm-superio `Serial`), a pure state machine: no KVM, no threads.
// Output goes to an OutputSink, interrupts to an IrqTrigger, counters to SerialEvents; input arrives with Enqueue.
//
//   offset  DLAB=0 read / write         DLAB=1
//   0       RBR (rx FIFO) / THR (out)    DLL
//   1       IER                          DLM
//   2       IIR (read) / FCR (write)
//   3 LCR (bit 7 = DLAB)  4 MCR (bit 4 = loopback)  5 LSR  6 MSR  7 SCR
//
//   THR write -> sink.Write(byte); if IER.THRE: IIR = THR-empty, irq    (loopback: the byte goes to the rx FIFO)
//   Enqueue(bytes) -> rx FIFO (64 bytes), the rest waits in a host-side backlog (64 KiB; beyond that dropped, with
//                     LSR overrun); LSR.DR; if IER.RDA: IIR = RDA, irq
//   RBR read -> pops the FIFO and tops it up from the backlog, so a pasted line longer than the FIFO arrives whole
//               (the guest keeps reading while LSR.DR stays set); IIR read clears a pending THR-empty interrupt
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "devices/bus.h"

namespace kvmts::devices {

// Register offsets and bits (16550 datasheet names).
inline constexpr uint16_t kDataOffset = 0, kIerOffset = 1, kIirOffset = 2, kLcrOffset = 3, kMcrOffset = 4,
                          kLsrOffset = 5, kMsrOffset = 6, kScrOffset = 7;
inline constexpr uint8_t kIerRdaBit = 0x01, kIerThreBit = 0x02;
inline constexpr uint8_t kIirNoneBit = 0x01, kIirThreBit = 0x02, kIirRdaBit = 0x04, kIirFifoBits = 0xc0;
inline constexpr uint8_t kLcrDlabBit = 0x80;
inline constexpr uint8_t kMcrLoopBit = 0x10;
inline constexpr uint8_t kLsrDrBit = 0x01, kLsrOverrunBit = 0x02, kLsrThreBit = 0x20, kLsrTemtBit = 0x40;
inline constexpr uint8_t kMsrDefault = 0xb0;  // DCD, DSR, CTS asserted
inline constexpr size_t kRxFifoBytes = 64;
// Console input waiting for room in the rx FIFO (what a terminal's flow control would hold back).
inline constexpr size_t kRxBacklogBytes = 64 * 1024;

class IrqTrigger {
 public:
  virtual ~IrqTrigger() = default;
  virtual void Trigger() = 0;
};

class OutputSink {
 public:
  virtual ~OutputSink() = default;
  virtual void Write(uint8_t byte) = 0;
};

// Counters, read by the machine's stats.
struct SerialEvents {
  uint64_t bytes_out = 0;
  uint64_t bytes_in = 0;
  uint64_t rx_dropped = 0;
};

class Serial16550 : public PioDevice {
 public:
  Serial16550(IrqTrigger* irq, OutputSink* out) : irq_(irq), out_(out) {}
  void Read(uint16_t offset, uint8_t* data, size_t len) override;
  void Write(uint16_t offset, const uint8_t* data, size_t len) override;
  // Queues console input (FIFO, then backlog); returns how many bytes were taken.
  size_t Enqueue(const uint8_t* data, size_t len);
  const SerialEvents& events() const { return events_; }

  // Persist: registers and the rx FIFO as bytes (version 1; version 2 when a backlog waits: then its length, 4
  // bytes little-endian, and its bytes follow), and back. Restore takes both; it returns false on a bad blob.
  std::vector<uint8_t> Save() const;
  bool Restore(const uint8_t* data, size_t len);
  // The interrupt line's state: true while an enabled interrupt condition is pending (received data with
  // IER.RDA, or THR-empty with IER.THRE, not yet acknowledged), i.e. what IIR would report. The line is pulsed
  // (one edge per event), so after a restore the machine pulses it again when this is true: an edge that was
  // raised but not yet in the saved interrupt controller is then not lost (a duplicate finds IIR empty).
  bool InterruptPending() const;

 private:
  uint8_t ReadReg(uint16_t offset);
  void WriteReg(uint16_t offset, uint8_t value);
  void UpdateIir();
  // Moves backlog bytes into the FIFO while it has room.
  void Refill();
  IrqTrigger* irq_;
  OutputSink* out_;
  SerialEvents events_;
  uint8_t ier_ = 0, lcr_ = 0x03, mcr_ = 0x08, lsr_ = kLsrThreBit | kLsrTemtBit, msr_ = kMsrDefault, scr_ = 0;
  uint8_t dll_ = 0x0c, dlm_ = 0, fcr_ = 0;
  bool thre_pending_ = false;
  std::deque<uint8_t> rx_;
  std::deque<uint8_t> backlog_;
};

}  // namespace kvmts::devices

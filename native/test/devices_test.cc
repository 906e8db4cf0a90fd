// Serial16550, I8042, TestPort and PioBus as pure state machines (vm-superio's tests, reduced).
#include <string>

#include "check.h"
#include "devices/bus.h"
#include "devices/i8042.h"
#include "devices/serial_16550.h"
#include "devices/test_port.h"

using namespace kvmts::devices;

namespace {

struct Recorder : IrqTrigger, OutputSink, ResetSink, ExitSink {
  int irqs = 0, resets = 0;
  std::string out;
  std::vector<uint32_t> exits;
  void Trigger() override { irqs++; }
  void Write(uint8_t b) override { out.push_back(static_cast<char>(b)); }
  void OnReset() override { resets++; }
  void OnGuestExit(uint32_t code) override { exits.push_back(code); }
};

uint8_t Rd(Serial16550& s, uint16_t off) {
  uint8_t v = 0;
  s.Read(off, &v, 1);
  return v;
}
void Wr(Serial16550& s, uint16_t off, uint8_t v) { s.Write(off, &v, 1); }
uint64_t FakeClock() { return 0x123456789ull; }

}  // namespace

TEST(serial_writes_thr_bytes_to_the_sink_and_reports_an_empty_transmitter) {
  Recorder r;
  Serial16550 s(&r, &r);
  for (char c : std::string("hi\n")) Wr(s, kDataOffset, static_cast<uint8_t>(c));
  CHECK_EQ(r.out, std::string("hi\n"));
  CHECK(Rd(s, kLsrOffset) & kLsrThreBit);
  CHECK(Rd(s, kLsrOffset) & kLsrTemtBit);
  CHECK_EQ(s.events().bytes_out, 3u);
  CHECK_EQ(r.irqs, 0);  // THRE interrupts are off
}

TEST(serial_thre_interrupt_is_raised_when_enabled_and_cleared_by_reading_iir) {
  Recorder r;
  Serial16550 s(&r, &r);
  Wr(s, kIerOffset, kIerThreBit);
  CHECK_EQ(r.irqs, 1);
  CHECK_EQ(Rd(s, kIirOffset) & 0x0f, kIirThreBit);
  CHECK_EQ(Rd(s, kIirOffset) & 0x0f, kIirNoneBit);
  Wr(s, kDataOffset, 'x');
  CHECK_EQ(r.irqs, 2);
}

TEST(serial_input_longer_than_the_fifo_waits_in_the_backlog_and_arrives_whole) {
  Recorder r;
  Serial16550 s(&r, &r);
  Wr(s, kIerOffset, kIerRdaBit);
  std::string line;
  for (int i = 0; i < 300; ++i) line.push_back(static_cast<char>('a' + i % 26));
  CHECK_EQ(s.Enqueue(reinterpret_cast<const uint8_t*>(line.data()), line.size()), line.size());
  CHECK_EQ(s.events().rx_dropped, 0u);
  CHECK(r.irqs >= 1);
  CHECK_EQ(Rd(s, kIirOffset) & 0x0f, kIirRdaBit);
  CHECK(!(Rd(s, kLsrOffset) & kLsrOverrunBit));
  std::string got;
  while (Rd(s, kLsrOffset) & kLsrDrBit) got.push_back(static_cast<char>(Rd(s, kDataOffset)));
  CHECK_EQ(got, line);
  CHECK_EQ(Rd(s, kIirOffset) & 0x0f, kIirNoneBit);
}

TEST(serial_input_beyond_the_backlog_is_dropped_with_an_overrun) {
  Recorder r;
  Serial16550 s(&r, &r);
  std::string big(kRxFifoBytes + kRxBacklogBytes + 100, 'a');
  CHECK_EQ(s.Enqueue(reinterpret_cast<const uint8_t*>(big.data()), big.size()), kRxFifoBytes + kRxBacklogBytes);
  CHECK_EQ(s.events().rx_dropped, 100u);
  uint8_t lsr = Rd(s, kLsrOffset);
  CHECK(lsr & kLsrDrBit);
  CHECK(lsr & kLsrOverrunBit);
  CHECK(!(Rd(s, kLsrOffset) & kLsrOverrunBit));  // overrun clears on read
  size_t n = 0;
  while (Rd(s, kLsrOffset) & kLsrDrBit) n += Rd(s, kDataOffset) == 'a';
  CHECK_EQ(n, kRxFifoBytes + kRxBacklogBytes);
}

TEST(serial_backlog_survives_save_and_restore) {
  Recorder r;
  Serial16550 a(&r, &r);
  std::string line(200, 'x');
  line[199] = 'y';
  a.Enqueue(reinterpret_cast<const uint8_t*>(line.data()), line.size());
  std::vector<uint8_t> blob = a.Save();
  CHECK_EQ(blob[0], 2);
  Serial16550 b(&r, &r);
  CHECK(b.Restore(blob.data(), blob.size()));
  std::string got;
  while (Rd(b, kLsrOffset) & kLsrDrBit) got.push_back(static_cast<char>(Rd(b, kDataOffset)));
  CHECK_EQ(got, line);
  CHECK(!b.Restore(blob.data(), blob.size() - 1));  // a truncated backlog is refused
}

TEST(serial_dlab_switches_offsets_0_and_1_to_the_divisor_latch) {
  Recorder r;
  Serial16550 s(&r, &r);
  Wr(s, kLcrOffset, kLcrDlabBit | 0x03);
  Wr(s, kDataOffset, 0x01);
  Wr(s, kIerOffset, 0x02);
  CHECK_EQ(Rd(s, kDataOffset), 0x01);
  CHECK_EQ(Rd(s, kIerOffset), 0x02);
  CHECK(r.out.empty());
  Wr(s, kLcrOffset, 0x03);
  CHECK_EQ(Rd(s, kIerOffset), 0);
}

TEST(serial_loopback_routes_output_to_input_and_mirrors_modem_lines) {
  Recorder r;
  Serial16550 s(&r, &r);
  Wr(s, kMcrOffset, kMcrLoopBit | 0x0f);
  Wr(s, kDataOffset, 'z');
  CHECK(r.out.empty());
  CHECK_EQ(Rd(s, kDataOffset), 'z');
  CHECK_EQ(Rd(s, kMsrOffset), 0xf0);
}

TEST(serial_state_survives_save_and_restore) {
  Recorder r;
  Serial16550 a(&r, &r);
  Wr(a, kIerOffset, kIerRdaBit);
  Wr(a, kScrOffset, 0x5a);
  uint8_t in[] = {'q', 'r'};
  a.Enqueue(in, 2);
  std::vector<uint8_t> blob = a.Save();
  Serial16550 b(&r, &r);
  CHECK(b.Restore(blob.data(), blob.size()));
  CHECK_EQ(Rd(b, kScrOffset), 0x5a);
  CHECK_EQ(Rd(b, kIerOffset), kIerRdaBit);
  CHECK_EQ(Rd(b, kDataOffset), 'q');
  CHECK_EQ(Rd(b, kDataOffset), 'r');
  blob[0] = 9;
  CHECK(!b.Restore(blob.data(), blob.size()));
  CHECK(!b.Restore(blob.data(), 3));
}

TEST(i8042_reset_command_reaches_the_sink_and_nothing_else_does) {
  Recorder r;
  I8042 dev(&r);
  uint8_t cmd = 0xfe, other = 0xd1;
  dev.Write(kI8042DataOffset, &cmd, 1);
  dev.Write(kI8042CommandOffset, &other, 1);
  CHECK_EQ(r.resets, 0);
  dev.Write(kI8042CommandOffset, &cmd, 1);
  CHECK_EQ(r.resets, 1);
  uint8_t status = 0xff;
  dev.Read(kI8042CommandOffset, &status, 1);
  CHECK_EQ(status, 0);
}

TEST(test_port_reports_exit_codes_and_reads_the_clock_and_signature) {
  Recorder r;
  TestPort port(&r, &FakeClock);
  uint8_t code[4] = {0x2a, 0x01, 0, 0};
  port.Write(0, code, 4);
  port.Write(0, code, 1);
  CHECK_EQ(r.exits.size(), 2u);
  CHECK_EQ(r.exits[0], 0x12au);
  CHECK_EQ(r.exits[1], 0x2au);
  uint8_t t[4];
  port.Read(0, t, 4);
  CHECK_EQ(t[0] | (t[1] << 8) | (t[2] << 16) | (static_cast<uint32_t>(t[3]) << 24), 0x23456789u);
  uint8_t sig = 0;
  port.Read(0, &sig, 1);
  CHECK_EQ(sig, kTestPortSignature);
}

TEST(bus_dispatches_by_port_range_and_reads_ff_where_nothing_listens) {
  Recorder r;
  Serial16550 s(&r, &r);
  TestPort port(&r, &FakeClock);
  PioBus bus;
  CHECK(bus.Register(0x3f8, 8, &s));
  CHECK(bus.Register(0xf4, 4, &port));
  CHECK(!bus.Register(0x3fc, 8, &port));  // overlaps the UART
  uint8_t b = 'k';
  CHECK(bus.Write(0x3f8, &b, 1));
  CHECK_EQ(r.out, std::string("k"));
  uint8_t v[2] = {0, 0};
  CHECK(!bus.Read(0x80, v, 2));
  CHECK_EQ(v[0], 0xff);
  CHECK_EQ(v[1], 0xff);
  CHECK(!bus.Write(0x80, &b, 1));
  CHECK(bus.LockOf(&s) != nullptr);
}

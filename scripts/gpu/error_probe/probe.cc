// Ways a custom op can raise an error, one op each, to find which of them kill the process on a
// machine whose g++ differs from the one that built libpaddle (see error_probe.py).
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "paddle/extension.h"

std::vector<paddle::Tensor> PdThrow(const paddle::Tensor& x) { PD_THROW("probe: PD_THROW ", 42); }

std::vector<paddle::Tensor> PdCheck(const paddle::Tensor& x) {
  PD_CHECK(x.numel() < 0, "probe: PD_CHECK");
  return {x};
}

std::vector<paddle::Tensor> StdThrow(const paddle::Tensor& x) {
  throw std::runtime_error(std::string("probe: std::runtime_error ") + std::to_string(42));
}

std::vector<paddle::Tensor> OstreamLong(const paddle::Tensor& x) {
  std::ostringstream out;
  out << 42L;  // no throw: does formatting a number through an ostream crash by itself?
  return {x};
}

std::vector<paddle::Tensor> OstreamThrow(const paddle::Tensor& x) {
  std::ostringstream out;
  out << "probe: ostringstream " << 42L;
  throw std::runtime_error(out.str());
}

std::vector<paddle::Tensor> ImbueClassic(const paddle::Tensor& x) {
  std::ostringstream out;
  out.imbue(std::locale::classic());
  out << 42L;
  return {x};
}

std::vector<paddle::Tensor> GlobalClassic(const paddle::Tensor& x) {
  std::locale::global(std::locale::classic());
  std::ostringstream out;
  out << 42L;
  return {x};
}

std::vector<paddle::Tensor> OstreamString(const paddle::Tensor& x) {
  std::ostringstream out;
  out << "text only";  // strings, no numbers
  return {x};
}

// A PD_Exception made without its constructor (which formats the line number through an
// ostream): copy-constructed from an object of the same layout holding the finished message.
struct ExceptionTwin {
  virtual ~ExceptionTwin() = default;
  std::string message;
};
static_assert(sizeof(ExceptionTwin) == sizeof(common::PD_Exception));

std::vector<paddle::Tensor> TwinThrow(const paddle::Tensor& x) {
  ExceptionTwin twin;
  twin.message = std::string("probe: twin ") + std::to_string(42);
  throw common::PD_Exception(*reinterpret_cast<const common::PD_Exception*>(&twin));
}

#define PROBE(name, fn) \
  PD_BUILD_OP(name).Inputs({"X"}).Outputs({"Out"}).SetKernelFn(PD_KERNEL(fn))
PROBE(probe_pd_throw, PdThrow);
PROBE(probe_pd_check, PdCheck);
PROBE(probe_std_throw, StdThrow);
PROBE(probe_ostream_long, OstreamLong);
PROBE(probe_ostream_throw, OstreamThrow);
PROBE(probe_imbue_classic, ImbueClassic);
PROBE(probe_global_classic, GlobalClassic);
PROBE(probe_ostream_string, OstreamString);
PROBE(probe_twin_throw, TwinThrow);

// The Python module tessera_torch._C: the function that torch.distributed calls, through
// the backend registered by tessera_torch/__init__.py, to create a group's backend (a
// c10d::Backend on torch 2.x, a c10d::ProcessGroup on 1.13: torch_api.h).
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "pytorch/operation_queue.h"
#include "pytorch/backend.h"

namespace py = pybind11;

namespace {

c10::intrusive_ptr<tessera_torch::TesseraBackend> CreateBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                          int size, std::chrono::milliseconds timeout,
                                                          const std::string& name,
                                                          const std::vector<int64_t>& global_ranks) {
  tessera_torch::GroupSpec spec;
  spec.store = store;
  spec.rank = rank;
  spec.size = size;
  spec.timeout = timeout;
  spec.name = name;
  spec.global_ranks = global_ranks;
  // The group's destructor joins its workers, which may need the interpreter to finish
  // a future (its Python callbacks die there): never join while holding it.
  spec.without_interpreter = [](const std::function<void()>& block) {
    if (PyGILState_Check()) {
      py::gil_scoped_release release;
      block();
    } else {
      block();
    }
  };
  return c10::make_intrusive<tessera_torch::TesseraBackend>(spec);
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "tessera's torch.distributed backend (use: import tessera_torch)";
#if TESSERA_TORCH_2
  // The backend as a Python subclass of torch's Backend. torch 2.x calls
  // perform_nocolor_split on a group bound to a device (init_process_group(device_id=...))
  // on every rank left out of a new subgroup; tessera's subgroups meet through the store
  // and need nothing from those ranks.
  py::class_<tessera_torch::TesseraBackend, c10::intrusive_ptr<tessera_torch::TesseraBackend>>(
      m, "TesseraBackend", py::module::import("torch._C._distributed_c10d").attr("Backend"))
      .def(
          "perform_nocolor_split", [](tessera_torch::TesseraBackend&, const py::object&) {}, py::arg("device"),
          "Nothing to do: a rank outside a new subgroup takes no part in making it.");
#else
  py::class_<tessera_torch::TesseraBackend, c10::intrusive_ptr<tessera_torch::TesseraBackend>>(
      m, "TesseraBackend", py::module::import("torch._C._distributed_c10d").attr("ProcessGroup"));
#endif
  m.attr("torch_version") = tessera_torch::CompiledTorchVersion();
  m.def("create_backend", &CreateBackend, py::arg("store"), py::arg("rank"), py::arg("size"),
        py::arg("timeout"), py::arg("name"), py::arg("global_ranks"),
        py::call_guard<py::gil_scoped_release>(),
        "Joins the tessera communicator of one torch process group (collective over the group).");
  m.def("shutdown_all", &tessera_torch::OperationQueue::ShutdownAll, py::call_guard<py::gil_scoped_release>(),
        "Runs what every tessera group has queued and stops its threads (registered with atexit).");
}

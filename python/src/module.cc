#include <pybind11/pybind11.h>

#include <exception>
#include <string>

#include "bindings.h"
#include "client/exit_codes.h"

namespace fusor::python {
namespace {

namespace py = pybind11;

// What ThrowStatus throws; the translator below turns it into the Python exception.
struct StatusError {
  Status status;
};

// The exception classes, created once at import and alive as long as the process (CPython never
// unloads an extension module).
struct ErrorClasses {
  PyObject* base;           // FusorError(RuntimeError): every failure.
  PyObject* invalid_model;  // InvalidArgumentError(FusorError, ValueError): exit code 4.
  PyObject* unavailable;    // UnavailableError(FusorError): exit code 3.
  PyObject* auth;           // AuthError(FusorError, PermissionError): exit code 5.
};
ErrorClasses errors;

PyObject* NewClass(py::module_& m, const char* name, PyObject* bases, const char* doc) {
  std::string qualified = std::string("fusor.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (!cls) throw py::error_already_set();
  m.add_object(name, py::handle(cls));
  return cls;
}

PyObject* ClassFor(const Status& s) {
  switch (ExitCodeFor(s)) {
    case kExitInvalidModel:
      return errors.invalid_model;
    case kExitUnavailable:
      return errors.unavailable;
    case kExitAuth:
      return errors.auth;
    default:
      return errors.base;
  }
}

void Raise(const Status& s) {
  py::handle cls(ClassFor(s));
  py::object error = cls(s.message());
  error.attr("code") = std::string(CodeName(s.code()));
  error.attr("exit_code") = static_cast<int>(ExitCodeFor(s));
  PyErr_SetObject(cls.ptr(), error.ptr());
}

}  // namespace

void ThrowStatus(const Status& s) { throw StatusError{s}; }

void RegisterErrors(py::module_& m) {
  const char* doc =
      "A Fusor failure. str(e) is the message the fusor CLI prints; e.code names the status "
      "(\"InvalidArgument\", \"NotFound\", ...) and e.exit_code is the CLI's exit code for it.";
  errors.base = NewClass(m, "FusorError", PyExc_RuntimeError, doc);
  py::tuple invalid = py::make_tuple(py::handle(errors.base), py::handle(PyExc_ValueError));
  errors.invalid_model = NewClass(m, "InvalidArgumentError", invalid.ptr(),
                                  "A malformed or unsupported model, input or argument.");
  errors.unavailable = NewClass(m, "UnavailableError", errors.base,
                                "The tuning server is unreachable, overloaded or too slow.");
  py::tuple auth = py::make_tuple(py::handle(errors.base), py::handle(PyExc_PermissionError));
  errors.auth = NewClass(m, "AuthError", auth.ptr(), "A missing, wrong or insufficient token.");
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      Raise(e.status);
    }
  });
}

}  // namespace fusor::python

PYBIND11_MODULE(_fusor, m) {
  m.doc() = "Fusor's engine and tuner; use the fusor package, which wraps this module.";
  fusor::python::RegisterErrors(m);
  fusor::python::RegisterSession(m);
  fusor::python::RegisterTuning(m);
  fusor::python::RegisterDatabase(m);
}

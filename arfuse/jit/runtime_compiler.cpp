#include "jit/runtime_compiler.hpp"

#include <fmt/format.h>

#include <functional>
#include <memory>
#include <vector>

#include "arfuse/error.hpp"

namespace arfuse::jit {
namespace {

std::string program_log(const RuntimeCompilerApi& api, RuntimeCompilerApi::Program program) {
  std::size_t size = 0;
  if (api.log_size(program, &size) != 0 || size <= 1) return {};
  std::string log(size, '\0');
  api.log(program, log.data());
  log.resize(log.find('\0') == std::string::npos ? size : log.find('\0'));  // the size counts the NUL
  return log;
}

}  // namespace

RuntimeCompilerApi::RuntimeCompilerApi(const DynamicLibrary& library, std::string name_prefix,
                                       const std::string& code_word)
    : prefix(std::move(name_prefix)), code_name(code_word) {
  auto bind = [&](auto& fn, const std::string& suffix) { library.bind(fn, (prefix + suffix).c_str()); };
  bind(version, "Version");
  bind(error_string, "GetErrorString");
  bind(create, "CreateProgram");
  bind(destroy, "DestroyProgram");
  bind(add_name_expression, "AddNameExpression");
  bind(compile, "CompileProgram");
  bind(lowered_name, "GetLoweredName");
  bind(log_size, "GetProgramLogSize");
  bind(log, "GetProgramLog");
  bind(code_size, "Get" + code_name + "Size");
  bind(code, "Get" + code_name);
}

void RuntimeCompilerApi::check(int result, const char* call) const {
  if (result != 0) throw Error(fmt::format("{}{} failed: {}", prefix, call, error_string(result)));
}

CompiledCode compile_with(const RuntimeCompilerApi& api, const char* compiler, const Source& source) {
  RuntimeCompilerApi::Program program = nullptr;
  api.check(api.create(&program, source.text.c_str(), source.program_name.c_str(), 0, nullptr, nullptr),
            "CreateProgram");
  std::unique_ptr<RuntimeProgram, std::function<void(RuntimeCompilerApi::Program)>> guard(
      program, [&api](RuntimeCompilerApi::Program p) { api.destroy(&p); });
  api.check(api.add_name_expression(program, source.name_expression.c_str()), "AddNameExpression");
  std::vector<const char*> options;
  for (const auto& o : source.options) options.push_back(o.c_str());
  const int result = api.compile(program, int(options.size()), options.data());
  CompiledCode code;
  code.log = program_log(api, program);
  if (result != 0) {
    throw CompileError(fmt::format("{} failed to compile {} ({}): {}", compiler, source.spec.text(),
                                   source.name_expression, api.error_string(result)),
                       code.log, source.name_expression, source.options);
  }
  const char* lowered = nullptr;
  api.check(api.lowered_name(program, source.name_expression.c_str(), &lowered), "GetLoweredName");
  code.lowered_name = lowered;
  std::size_t size = 0;
  api.check(api.code_size(program, &size), ("Get" + api.code_name + "Size").c_str());
  code.payload.resize(size);
  api.check(api.code(program, reinterpret_cast<char*>(code.payload.data())), ("Get" + api.code_name).c_str());
  return code;
}

}  // namespace arfuse::jit

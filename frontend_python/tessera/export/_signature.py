"""The signature of an exported program (torch.export.graph_signature's names): what each graph
input is (a parameter, a buffer, a lifted constant or a user input) and what each graph output is
(a user output or the new contents of a buffer or input written in place)."""
import dataclasses
import enum


class InputKind(enum.Enum):
    USER_INPUT = "user_input"
    PARAMETER = "parameter"
    BUFFER = "buffer"
    CONSTANT_TENSOR = "constant_tensor"


class OutputKind(enum.Enum):
    USER_OUTPUT = "user_output"
    BUFFER_MUTATION = "buffer_mutation"
    PARAMETER_MUTATION = "parameter_mutation"
    USER_INPUT_MUTATION = "user_input_mutation"


@dataclasses.dataclass(frozen=True)
class TensorArgument:
    name: str


@dataclasses.dataclass(frozen=True)
class InputSpec:
    kind: InputKind
    arg: TensorArgument
    target: str = None          # the state_dict / constants name, or None for a user input
    persistent: bool = None     # buffers only: in the state_dict (True) or in constants (False)


@dataclasses.dataclass(frozen=True)
class OutputSpec:
    kind: OutputKind
    arg: TensorArgument
    target: str = None          # the buffer, parameter or user input written


@dataclasses.dataclass(frozen=True)
class ExportGraphSignature:
    input_specs: list
    output_specs: list

    def _inputs(self, kind):
        return [s for s in self.input_specs if s.kind == kind]

    @property
    def parameters(self):
        return [s.target for s in self._inputs(InputKind.PARAMETER)]

    @property
    def buffers(self):
        return [s.target for s in self._inputs(InputKind.BUFFER)]

    @property
    def non_persistent_buffers(self):
        return [s.target for s in self._inputs(InputKind.BUFFER) if not s.persistent]

    @property
    def lifted_tensor_constants(self):
        return [s.target for s in self._inputs(InputKind.CONSTANT_TENSOR)]

    @property
    def user_inputs(self):
        return [s.arg.name for s in self._inputs(InputKind.USER_INPUT)]

    @property
    def user_outputs(self):
        return [s.arg.name for s in self.output_specs if s.kind == OutputKind.USER_OUTPUT]

    @property
    def inputs_to_parameters(self):
        return {s.arg.name: s.target for s in self._inputs(InputKind.PARAMETER)}

    @property
    def inputs_to_buffers(self):
        return {s.arg.name: s.target for s in self._inputs(InputKind.BUFFER)}

    @property
    def inputs_to_lifted_tensor_constants(self):
        return {s.arg.name: s.target for s in self._inputs(InputKind.CONSTANT_TENSOR)}

    @property
    def buffers_to_mutate(self):
        return {s.arg.name: s.target for s in self.output_specs if s.kind == OutputKind.BUFFER_MUTATION}

    @property
    def user_inputs_to_mutate(self):
        return {s.arg.name: s.target for s in self.output_specs if s.kind == OutputKind.USER_INPUT_MUTATION}

    def to_json(self):
        def spec(s):
            d = {"kind": s.kind.value, "name": s.arg.name, "target": s.target}
            if getattr(s, "persistent", None) is not None:
                d["persistent"] = s.persistent
            return d
        return {"inputs": [spec(s) for s in self.input_specs], "outputs": [spec(s) for s in self.output_specs]}

    @classmethod
    def from_json(cls, j):
        inputs = [InputSpec(InputKind(s["kind"]), TensorArgument(s["name"]), s.get("target"), s.get("persistent"))
                  for s in j["inputs"]]
        outputs = [OutputSpec(OutputKind(s["kind"]), TensorArgument(s["name"]), s.get("target")) for s in j["outputs"]]
        return cls(inputs, outputs)

    def __str__(self):
        lines = ["# inputs"]
        lines += [f"{s.arg.name}: {s.kind.name}" + (f" target='{s.target}'" if s.target else "") +
                  (" persistent=False" if s.persistent is False else "") for s in self.input_specs]
        lines += ["", "# outputs"]
        lines += [f"{s.arg.name}: {s.kind.name}" + (f" target='{s.target}'" if s.target else "")
                  for s in self.output_specs]
        return "\n".join(lines)

// Job tensors <-> CoreML values. Files hold raw little-endian C-order scalars (Apple silicon is
// little-endian, so the bytes are copied as they are).
import CoreML
import Foundation

public enum TensorError: Error, CustomStringConvertible {
    case unsupportedDtype(String)
    case wrongSize(name: String, bytes: Int, expected: Int)
    case notAMultiArray(String)
    case featureMismatch(given: [String], expected: [String])

    public var description: String {
        switch self {
        case .unsupportedDtype(let dtype): return "unsupported dtype \(dtype)"
        case .wrongSize(let name, let bytes, let expected): return "\(name): \(bytes) bytes, \(expected) expected"
        case .notAMultiArray(let name): return "output \(name) is not an MLMultiArray"
        case .featureMismatch(let given, let expected):
            return "the job's inputs \(given) do not match the model's input features \(expected)"
        }
    }
}

enum Tensors {
    static func dataType(_ dtype: String) throws -> (MLMultiArrayDataType, Int) {
        switch dtype {
        case "float32": return (.float32, 4)
        case "float16": return (.float16, 2)
        case "float64": return (.float64, 8)
        case "int32": return (.int32, 4)
        default: throw TensorError.unsupportedDtype(dtype)
        }
    }

    /// An MLMultiArray over a copy of the file's bytes, with C-order strides.
    static func multiArray(_ tensor: TensorFile, home: URL) throws -> MLMultiArray {
        let (dataType, scalarSize) = try dataType(tensor.dtype)
        let data = try Data(contentsOf: home.appending(path: tensor.path))
        let count = tensor.shape.reduce(1, *)
        guard data.count == count * scalarSize else {
            throw TensorError.wrongSize(name: tensor.name, bytes: data.count, expected: count * scalarSize)
        }
        var strides = [Int](repeating: 1, count: tensor.shape.count)
        for axis in stride(from: tensor.shape.count - 2, through: 0, by: -1) {
            strides[axis] = strides[axis + 1] * tensor.shape[axis + 1]
        }
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: max(data.count, 1), alignment: 16)
        data.copyBytes(to: buffer.assumingMemoryBound(to: UInt8.self), count: data.count)
        return try MLMultiArray(
            dataPointer: buffer,
            shape: tensor.shape.map { NSNumber(value: $0) },
            dataType: dataType,
            strides: strides.map { NSNumber(value: $0) },
            deallocator: { $0.deallocate() }
        )
    }

    /// The job's inputs keyed by their feature names, after checking they are exactly the model's
    /// input features (the host wrote them from the compile's I/O name map).
    static func features(_ inputs: [TensorFile], home: URL, model: MLModelDescription) throws -> MLFeatureProvider {
        let expected = Set(model.inputDescriptionsByName.keys)
        let given = Set(inputs.map(\.name))
        guard given == expected else {
            throw TensorError.featureMismatch(given: given.sorted(), expected: expected.sorted())
        }
        var values: [String: MLFeatureValue] = [:]
        for tensor in inputs {
            values[tensor.name] = MLFeatureValue(multiArray: try multiArray(tensor, home: home))
        }
        return try MLDictionaryFeatureProvider(dictionary: values)
    }

    /// Writes an output as contiguous scalars: int32 stays int32, every float type becomes float32.
    static func write(
        _ value: MLFeatureValue?, name: String, onnxName: String?, to url: URL, path: String
    ) throws -> TensorFile {
        guard let array = value?.multiArrayValue else { throw TensorError.notAMultiArray(name) }
        let shape = array.shape.map { $0.intValue }
        let data: Data
        let dtype: String
        if array.dataType == .int32 {
            data = MLShapedArray<Int32>(converting: array).scalars.withUnsafeBufferPointer { Data(buffer: $0) }
            dtype = "int32"
        } else {
            data = MLShapedArray<Float>(converting: array).scalars.withUnsafeBufferPointer { Data(buffer: $0) }
            dtype = "float32"
        }
        try data.write(to: url, options: .atomic)
        return TensorFile(name: name, onnxName: onnxName, dtype: dtype, shape: shape, path: path)
    }
}

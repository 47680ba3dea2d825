import Foundation
import Observability
package import Support

/// Raw setting values for one mode: the mode's section of the configuration file, overridden by `PUSHCHAT_*`
/// environment variables. Typed parsing lives in ``Configuration``.
package struct ConfigurationSource: Sendable {
    /// Where the file is looked for when `--config` is not given. A missing default file is not an error.
    package static let defaultPath = "config/pushchat.json"

    package let mode: Mode
    /// The file the values came from, if one was read.
    package let filePath: String?
    let fileValues: [String: String]
    let environment: [String: String]

    package init(mode: Mode, fileValues: [String: String] = [:], filePath: String? = nil, environment: [String: String]) {
        self.mode = mode
        self.fileValues = fileValues
        self.filePath = filePath
        self.environment = environment
    }

    /// Reads the mode's section from `path` (or the default path, when it exists).
    package static func load(
        mode: Mode,
        path: String?,
        environment: [String: String]
    ) throws(ConfigurationError) -> ConfigurationSource {
        let chosen = path ?? defaultPath
        guard let data = FileManager.default.contents(atPath: chosen) else {
            if path == nil && !FileManager.default.fileExists(atPath: chosen) {
                return ConfigurationSource(mode: mode, environment: environment)
            }
            throw ConfigurationError(code: .unreadableFile, key: chosen, reason: "cannot read the configuration file")
        }
        let values = try parse(data, mode: mode, path: chosen)
        return ConfigurationSource(mode: mode, fileValues: values, filePath: chosen, environment: environment)
    }

    /// Parses a configuration file: an object with a `development` and a `production` section of scalar values.
    /// Keys starting with `_` (such as `_comment`) are ignored, so the file can document itself.
    static func parse(_ data: Data, mode: Mode, path: String) throws(ConfigurationError) -> [String: String] {
        let sections: [String: [String: Scalar]]
        do {
            sections = try JSONDecoder().decode(TopLevel.self, from: data).sections
        } catch {
            throw ConfigurationError(
                code: .malformedFile,
                key: path,
                reason: "expected a JSON object with 'development' and 'production' sections of strings and numbers"
            )
        }
        for name in sections.keys where Mode(rawValue: name) == nil {
            throw ConfigurationError(code: .malformedFile, key: path, reason: "unknown section '\(name)'")
        }
        let known = Set(ConfigurationKey.allCases.map(\.fileKey))
        for (name, section) in sections.sorted(by: { $0.key < $1.key }) {
            for key in section.keys.sorted() where !known.contains(key) {
                throw ConfigurationError(code: .unknownKey, key: path, reason: "unknown key '\(key)' in section '\(name)'")
            }
        }
        return (sections[mode.rawValue] ?? [:]).mapValues(\.text)
    }

    /// The raw value of `key`: the environment variable if set, else the file's value.
    package func value(_ key: ConfigurationKey) -> String? {
        if let value = environment[key.environmentName] { return value }
        return fileValues[key.fileKey]
    }

    /// Where a key's value can be set, for error messages.
    func origin(of key: ConfigurationKey) -> String {
        if environment[key.environmentName] != nil { return key.environmentName }
        if let filePath, fileValues[key.fileKey] != nil { return "\(key.environmentName) ('\(key.fileKey)' in \(filePath))" }
        return key.environmentName
    }
}

extension ConfigurationSource {
    /// The file's top level: one object per mode; `_`-prefixed keys are comments.
    private struct TopLevel: Decodable {
        let sections: [String: [String: Scalar]]

        init(from decoder: any Decoder) throws {
            let raw = try decoder.container(keyedBy: AnyKey.self)
            var sections: [String: [String: Scalar]] = [:]
            for key in raw.allKeys where !key.stringValue.hasPrefix("_") {
                let section = try raw.nestedContainer(keyedBy: AnyKey.self, forKey: key)
                var values: [String: Scalar] = [:]
                for entry in section.allKeys where !entry.stringValue.hasPrefix("_") {
                    values[entry.stringValue] = try section.decode(Scalar.self, forKey: entry)
                }
                sections[key.stringValue] = values
            }
            self.sections = sections
        }
    }

    /// A string, number or boolean in the file, kept as the text an environment variable would hold.
    struct Scalar: Decodable {
        let text: String

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let string = try? container.decode(String.self) {
                text = string
            } else if let int = try? container.decode(Int.self) {
                text = String(int)
            } else if let double = try? container.decode(Double.self) {
                text = String(double)
            } else {
                text = String(try container.decode(Bool.self))
            }
        }
    }

    private struct AnyKey: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}

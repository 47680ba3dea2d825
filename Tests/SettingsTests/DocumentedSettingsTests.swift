import Foundation
import Testing

@testable import Settings

/// One source of truth for settings: the README's configuration table and the environment file examples name the
/// keys the code reads, and every default they state is the code's (setting a key to its documented default
/// changes nothing).
@Suite struct DocumentedSettingsTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let url = "postgres://pushchat:secret@db.example:5432/pushchat"

    /// Everything a configuration holds, as text: two configurations print alike when every setting is alike.
    static func printed(_ environment: [String: String], mode: Mode = .production) throws -> String {
        let source = ConfigurationSource(mode: mode, environment: ["PUSHCHAT_DATABASE_URL": url].merging(environment) { $1 })
        var text = ""
        dump(try Configuration(source: source), to: &text)
        return text
    }

    /// The table's rows: the keys of the first column, the environment names of the second, the third column.
    static func tableRows() throws -> [(keys: [String], names: [String], defaults: String)] {
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let lines = readme.components(separatedBy: "\n")
        guard let header = lines.firstIndex(of: "| file key | environment | default | meaning |") else { return [] }
        return lines[(header + 2)...].prefix { $0.hasPrefix("|") }.map { line in
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
            return (codeSpans(cells[1]), codeSpans(cells[2]), cells[3].trimmingCharacters(in: .whitespaces))
        }
    }

    static func codeSpans(_ text: String) -> [String] {
        text.split(separator: "`", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }.map {
            String($0.element)
        }
    }

    @Test func theREADMETableNamesEveryKeyOnceAndItsEnvironmentName() throws {
        let rows = try Self.tableRows()
        let documented = rows.flatMap(\.keys)
        #expect(documented.count == Set(documented).count, "a key is in the table twice")
        #expect(Set(documented) == Set(ConfigurationKey.allCases.map(\.fileKey)))
        for row in rows {
            for (key, name) in zip(row.keys, row.names) {
                guard let known = ConfigurationKey(rawValue: key) else { continue }
                // `…_BURST_PER_IP` abbreviates the name after the row's first one; `PUSHCHAT_RETENTION_…` all of them.
                if name.hasPrefix("…") {
                    #expect(known.environmentName.hasSuffix(name.dropFirst()), "\(key): \(name)")
                } else if name.hasSuffix("…") {
                    #expect(known.environmentName.hasPrefix(name.dropLast()), "\(key): \(name)")
                } else {
                    #expect(known.environmentName == name, "\(key): \(name)")
                }
            }
        }
    }

    @Test func theREADMETableStatesTheCodesDefaults() throws {
        let base = try Self.printed([:])
        var checked = 0
        for row in try Self.tableRows() {
            // Only plain defaults, one per key (`20`, `40`); prose ("on in development, …") is read by people.
            let values = Self.codeSpans(row.defaults)
            let rest = row.defaults.split(separator: "`", omittingEmptySubsequences: false).enumerated()
                .filter { $0.offset % 2 == 0 }.map(\.element).joined()
            guard values.count == row.keys.count, rest.allSatisfy({ $0 == "," || $0 == " " }),
                !values.contains(where: { $0.contains("<") })
            else { continue }
            for (key, value) in zip(row.keys, values) {
                let name = try #require(ConfigurationKey(rawValue: key)).environmentName
                #expect(try Self.printed([name: value]) == base, "README: \(key)'s default is not \(value)")
                checked += 1
            }
        }
        #expect(checked >= 40, "only \(checked) defaults were read from the table")
    }

    @Test(arguments: ["deploy/pushchat.env.example", "deploy/apns.env.example"])
    func theEnvironmentExamplesNameKnownKeysAndTheirDefaults(file: String) throws {
        let text = try String(contentsOf: Self.root.appendingPathComponent(file), encoding: .utf8)
        let known = Set(ConfigurationKey.allCases.map(\.environmentName))
        let base = try Self.printed([:])
        var defaults = 0
        // Paragraphs: a commented assignment in one that says "defaults shown" states the code's default.
        for paragraph in text.components(separatedBy: "\n\n") {
            let statesDefaults = paragraph.contains("default shown") || paragraph.contains("defaults shown")
            for line in paragraph.components(separatedBy: "\n") {
                let assignment = line.hasPrefix("#") ? line.drop { $0 == "#" || $0 == " " } : Substring(line)
                guard assignment.hasPrefix("PUSHCHAT_"), let equals = assignment.firstIndex(of: "=") else { continue }
                let name = String(assignment[..<equals])
                let value = String(assignment[assignment.index(after: equals)...])
                #expect(known.contains(name), "\(file): \(name) is not a setting")
                if line.hasPrefix("#") && statesDefaults && known.contains(name) {
                    #expect(try Self.printed([name: value]) == base, "\(file): \(name)'s default is not \(value)")
                    defaults += 1
                }
            }
        }
        if file.hasPrefix("deploy/pushchat") {
            #expect(defaults >= 20, "only \(defaults) defaults were read from \(file)")
        }
    }
}

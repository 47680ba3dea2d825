import Foundation
import Testing

/// `docs/ARCHITECTURE.md`'s module table against the code: what each module's files import of the project's modules
/// is exactly what the table allows and what `Package.swift` declares, and no target uses a module it does not
/// declare (one that compiles only because another target imported it).
@Suite struct ArchitectureTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func read(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    /// Modules the toolchain provides, never declared.
    static let system: Set<String> = [
        "Foundation", "FoundationEssentials", "Synchronization", "Dispatch", "Glibc", "Musl", "Darwin", "Testing", "XCTest",
        "_Concurrency",
    ]

    /// The modules each `Sources` or `Tests` folder's files import.
    static func imports(in folder: String) throws -> Set<String> {
        let directory = root.appendingPathComponent(folder)
        var found: Set<String> = []
        let files = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil)?.compactMap { $0 as? URL } ?? []
        for file in files where file.pathExtension == "swift" {
            for line in try String(contentsOf: file, encoding: .utf8).split(separator: "\n") {
                var words = line.split(separator: " ").map(String.init)
                while let first = words.first, ["@testable", "internal", "public", "package", "@_exported"].contains(first) {
                    words.removeFirst()
                }
                if words.count >= 2, words[0] == "import" { found.insert(words[1]) }
            }
        }
        return found
    }

    /// Each target of `Package.swift`: its name and what it declares (targets by name, products by their module name).
    static func targets() throws -> [String: Set<String>] {
        let manifest = try read("Package.swift")
        var products: [String: String] = [:]
        for line in manifest.split(separator: "\n") where line.hasPrefix("let ") && line.contains(".product(name: \"") {
            let variable = String(line.dropFirst(4).prefix { $0 != " " })
            products[variable] = Self.quoted(line).first
        }
        var targets: [String: Set<String>] = [:]
        let pieces = manifest.components(separatedBy: "Target(").dropFirst() + manifest.components(separatedBy: ".target(").dropFirst()
        for piece in pieces {
            guard let name = Self.quoted(piece).first else { continue }
            var declared: Set<String> = []
            if let start = piece.range(of: "dependencies: [") {
                let list = piece[start.upperBound...].prefix { $0 != "]" }
                declared.formUnion(Self.quoted(String(list)).filter { !$0.hasPrefix("swift-") && $0 != "hummingbird" })
                for word in list.split(whereSeparator: { !$0.isLetter && !$0.isNumber }) {
                    if let product = products[String(word)] { declared.insert(product) }
                }
            }
            targets[name] = declared
        }
        return targets
    }

    static func quoted(_ text: some StringProtocol) -> [String] {
        text.split(separator: "\"", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) }
    }

    /// The table's rows: module → the project modules it may import.
    static func table() throws -> [String: Set<String>] {
        var rows: [String: Set<String>] = [:]
        for line in try read("docs/ARCHITECTURE.md").split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 5 else { continue }
            let module = Self.backticked(cells[1]).first ?? ""
            rows[module] = Set(Self.backticked(cells[3]))
        }
        return rows
    }

    static func backticked(_ text: String) -> [String] {
        text.split(separator: "`", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) }
    }

    static func modules() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("Sources").path).filter { !$0.hasPrefix(".") }
            .sorted()
    }

    @Test func theTableListsEveryModuleWithExactlyWhatItImportsAndDeclares() throws {
        let modules = try Self.modules()
        let table = try Self.table()
        let targets = try Self.targets()
        #expect(Set(table.keys) == Set(modules), "a row per module")
        for module in modules {
            let imported = try Self.imports(in: "Sources/\(module)").intersection(modules).subtracting([module])
            #expect(imported == table[module], "\(module) imports \(imported.sorted()); the table says \((table[module] ?? []).sorted())")
            let declared = (targets[module] ?? []).intersection(modules)
            #expect(declared == imported, "\(module): Package.swift declares \(declared.sorted()), its files import \(imported.sorted())")
        }
    }

    @Test func noTargetUsesAModuleItDoesNotDeclare() throws {
        let targets = try Self.targets()
        #expect(targets.count > 20, "the manifest was read")
        for (target, declared) in targets {
            let folder =
                FileManager.default.fileExists(atPath: Self.root.appendingPathComponent("Tests/\(target)").path) ? "Tests" : "Sources"
            let undeclared = try Self.imports(in: "\(folder)/\(target)").subtracting(declared).subtracting(Self.system).subtracting([target]
            )
            #expect(undeclared.isEmpty, "\(target) imports \(undeclared.sorted()) without declaring them in Package.swift")
        }
    }
}

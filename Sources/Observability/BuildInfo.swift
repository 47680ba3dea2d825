import Foundation

/// Which release this process is: the `VERSION` file of its release folder (its working directory under systemd;
/// `make dist` writes it), `PUSHCHAT_VERSION` when set, else `development`.
package enum BuildInfo {
    package static let version: String = {
        if let set = ProcessInfo.processInfo.environment["PUSHCHAT_VERSION"], !set.isEmpty { return set }
        let file = FileManager.default.currentDirectoryPath + "/VERSION"
        guard let text = try? String(contentsOfFile: file, encoding: .utf8) else { return "development" }
        let line = text.split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
        let clean = line.filter { $0.isLetter || $0.isNumber || ".-_+".contains($0) }
        return clean.isEmpty ? "development" : String(clean.prefix(64))
    }()
}

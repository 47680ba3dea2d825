import Foundation
import Testing

/// Every input in the fuzz corpus (the seeds, and any crash libFuzzer found, added there) goes through the parsers
/// again on every test run: a crash found once stays a test.
@Suite struct FuzzCorpusTests {
    @Test(arguments: ["forms", "multipart", "binary", "feedback", "provider", "fcm", "http2", "http2client", "webpush"])
    func theCorpusReplaysWithoutACrash(target: String) throws {
        let corpus = TestDatabase.repositoryRoot.appendingPathComponent("Fuzz/corpus/\(target)").path
        let files = try FileManager.default.contentsOfDirectory(atPath: corpus)
        #expect(!files.isEmpty)
        let result = try Executable(name: "pushchat-fuzz").run([corpus], environment: ["PUSHCHAT_FUZZ": target])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput.contains("replayed \(files.count) inputs through \(target)"))
    }
}

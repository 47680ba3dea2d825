import ArgumentParser
import Foundation
import Support

/// Turns the errors a PushChat executable expects into one clear line on standard error and a non-zero exit,
/// instead of a usage dump or a crash.
package enum ProcessFailure {
    package static func report<T>(program: String, _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as any PushChatError {
            printError(program, error.description)
            throw ExitCode(error.exitStatus)
        }
    }

    package static func printError(_ program: String, _ message: String) {
        FileHandle.standardError.write(Data("\(program): \(message)\n".utf8))
    }
}

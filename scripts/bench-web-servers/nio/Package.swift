// swift-tools-version:6.0
import PackageDescription
let package = Package(name: "nioserve",
  dependencies: [.package(url: "https://github.com/apple/swift-nio", from: "2.101.2")],
  targets: [.executableTarget(name: "nioserve", dependencies: [.product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"), .product(name: "NIOHTTP1", package: "swift-nio")])])

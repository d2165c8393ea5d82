package authz

// rule is one method's requirement: the roles of which the caller must hold
// one (none: any caller, authenticated or local) and whether the request's
// node id must be the caller's.
type rule struct {
	roles     []Role
	nodeBound bool
}

var (
	writers = []Role{RoleAdmin}
	readers = []Role{RoleReader, RoleAdmin}
	agents  = []Role{RoleAgent}
)

// methods is the method table; a method it does not name is refused. A
// test checks that it names every method of every mcpready service.
var methods = map[string]rule{
	"/mcpready.v1.AdminService/Apply":               {roles: writers},
	"/mcpready.v1.AdminService/Delete":              {roles: writers},
	"/mcpready.v1.AdminService/Get":                 {roles: readers},
	"/mcpready.v1.AdminService/History":             {roles: readers},
	"/mcpready.v1.AdminService/RegistryStatus":      {roles: readers},
	"/mcpready.v1.AdminService/ReportDrift":         {roles: agents, nodeBound: true},
	"/mcpready.v1.DiscoveryService/StreamResources": {roles: agents, nodeBound: true},
	"/mcpready.v1.DiscoveryService/DeltaResources":  {roles: agents, nodeBound: true},
	"/mcpready.v1.ReceiptsService/UploadBatches":    {roles: agents, nodeBound: true},
	"/mcpready.v1.ReceiptsService/QueryReceipts":    {roles: readers},
	"/mcpready.v1.ReceiptsService/TailReceipts":     {roles: readers},
	"/mcpready.v1.ReceiptsService/ExportBatches":    {roles: readers},
	"/grpc.health.v1.Health/Check":                  {},
	"/grpc.health.v1.Health/Watch":                  {},
	"/grpc.health.v1.Health/List":                   {},
}

// Covers reports whether the method table names method (a full gRPC method
// name, "/package.Service/Method"); a method it does not cover is refused.
func Covers(method string) bool {
	_, ok := methods[method]
	return ok
}

module github.com/lockkit/lockkit/httplock

go 1.24.13

// The repository's go.work joins the modules; this replace does the same
// when the module is built alone (GOWORK=off).
replace github.com/lockkit/lockkit => ..

package codemodetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os/exec"
	"sync"
	"syscall"

	"github.com/gantryhq/gantry/codemode"
)

// HostLauncher starts stdio servers as processes of the test's own host,
// with exactly the environment code mode chose. It is for code mode's own
// unit tests, whose fixtures are the test binary: gantry itself never runs
// a stdio server on its host (a runner's launcher gives each a container).
// Launches records every launch it was asked for.
type HostLauncher struct {
	mu       sync.Mutex
	launches []codemode.Launch
}

// Launches returns the launches asked for so far.
func (h *HostLauncher) Launches() []codemode.Launch {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]codemode.Launch(nil), h.launches...)
}

// Launch implements codemode.Launcher.
func (h *HostLauncher) Launch(_ context.Context, l codemode.Launch) (codemode.Process, error) {
	h.mu.Lock()
	h.launches = append(h.launches, l)
	h.mu.Unlock()
	cmd := exec.Command(l.Argv[0], l.Argv[1:]...)
	cmd.Env = l.Env
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &hostProcess{cmd: cmd}
	cmd.Stderr = &p.stderr
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if p.stdout, err = cmd.StdoutPipe(); err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return p, nil
}

type hostProcess struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.Reader
	stderr syncBuffer
	once   sync.Once
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (p *hostProcess) Stdin() io.WriteCloser { return p.stdin }
func (p *hostProcess) Stdout() io.Reader     { return p.stdout }
func (p *hostProcess) Stderr() string        { return p.stderr.String() }

func (p *hostProcess) Close() error {
	p.once.Do(func() {
		_ = p.stdin.Close()
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		_ = p.cmd.Wait()
	})
	return nil
}

// StdioPython is a stdio MCP server in Python's standard library, so that
// it runs in the sandbox image as the operator's command
// (StdioCommand). Its tools: invoice_total {customer_id} (structured
// {customer_id, open_eur}, as the Go billing fixture), whoami (whether
// CRM_TOKEN carries Token) and facts (what the server can see of where it
// runs: uid, capabilities, no_new_privs, seccomp, network interfaces, the
// Docker socket, its environment's names, a write to /).
var StdioPython = `import hashlib,json,os,sys
def facts():
    st=dict(l.split(':\t',1) for l in open('/proc/self/status').read().splitlines() if ':\t' in l)
    try:
        open('/gantry-probe','w');root=True
    except OSError:
        root=False
    return {'uid':os.getuid(),'gid':os.getgid(),'cap_eff':st['CapEff'].strip(),'cap_bnd':st['CapBnd'].strip(),
     'no_new_privs':st['NoNewPrivs'].strip(),'seccomp':st['Seccomp'].strip(),'net':sorted(os.listdir('/sys/class/net')),
     'docker_sock':any(os.path.exists(p) for p in ('/var/run/docker.sock','/run/docker.sock')),
     'env':sorted(os.environ),'root_writable':root,'hostname':os.uname().nodename}
T={'invoice_total':('Sum of the open invoices of a customer, in EUR.',{'customer_id':{'type':'number'}}),
 'whoami':('Says whether the request carried the right credential.',{}),
 'facts':('Reports what this server can see of where it runs.',{})}
def call(n,a):
    if n=='invoice_total':
        i=int(a.get('customer_id',-1));return {'customer_id':i,'open_eur':i*100.5}
    if n=='whoami':return {'authorized':hashlib.sha256(os.environ.get('CRM_TOKEN','').encode()).hexdigest()=='` + tokenHash + `'}
    return facts()
for line in sys.stdin:
    m=json.loads(line);i=m.get('id');f=m.get('method');p=m.get('params') or {}
    if i is None:continue
    if f=='initialize':r={'protocolVersion':p.get('protocolVersion'),'capabilities':{'tools':{}},'serverInfo':{'name':'py-fixture','version':'1'}}
    elif f=='tools/list':r={'tools':[{'name':k,'description':d,'inputSchema':{'type':'object','properties':s}} for k,(d,s) in T.items()]}
    elif f=='tools/call' and p.get('name') in T:
        o=call(p['name'],p.get('arguments') or {});r={'content':[{'type':'text','text':json.dumps(o)}],'structuredContent':o}
    elif f=='ping':r={}
    else:
        print(json.dumps({'jsonrpc':'2.0','id':i,'error':{'code':-32601,'message':'no method '+str(f)}}),flush=True);continue
    print(json.dumps({'jsonrpc':'2.0','id':i,'result':r}),flush=True)
`

// tokenHash is Token's SHA-256: the fixture's source is shown by the API
// (a server's command), so it holds no credential.
var tokenHash = func() string { h := sha256.Sum256([]byte(Token)); return hex.EncodeToString(h[:]) }()

// StdioCommand is the operator's command that serves StdioPython.
func StdioCommand() []string { return []string{"python3", "-c", StdioPython} }
